// The storage port's conformance suite (src/daemon/store/port/): what every backend must do,
// whatever its engine. `portConformance(name, factory)` registers the suite; each backend's test
// file runs it on a fresh store per test (test/store/port-leveldb.test.ts on LevelDB in a temp
// dir; the PostgreSQL backend on a throwaway cluster). Only port methods are used here, so the
// suite stays backend-neutral.

import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { makeStreamId } from '../../src/shared/ids.js';
import type { StoredRecord } from '../../src/shared/types.js';
import type { StorePort } from '../../src/daemon/store/port/store-port.js';
import { expectOf, type CommitOutcome, type StreamMeta } from '../../src/daemon/store/port/index.js';
import type { AgentRow, ChatRow, CorruptMark, StoredOperation } from '../../src/daemon/store/port/values.js';
import { cloneMeta, newStreamMeta } from '../../src/daemon/store/stream-meta.js';
import { outcomeOf } from '../../src/daemon/store/port/stream-port.js';
import { writeFailed } from '../../src/daemon/store/port/gate.js';
import { TRIM_DELETE_BATCH } from '../../src/daemon/store/port/stream-kernel.js';
import { errors } from '../../src/shared/errors.js';

/** A store under test, and how to end it. */
export interface PortUnderTest {
  store: StorePort;
  /** Close the store and remove what the test made. */
  close(): Promise<void>;
  /**
   * Make the next group commit fail as a lost fsync or connection would (outcome unknown), when
   * the backend can inject that (and resolves once armed); the unknown-outcome test is skipped
   * without it.
   */
  failNextCommit?: () => void | Promise<void>;
}

/** A fresh, empty store per call. */
export type PortFactory = () => Promise<PortUnderTest>;

const now = () => new Date().toISOString();
const id = (prefix: string) => `${prefix}${randomUUID().replaceAll('-', '')}`;

function agentRow(username = id('u')): AgentRow {
  return {
    id: id('agt_'),
    username,
    name: username,
    image: null,
    disabled: false,
    pii: 'redact',
    createdAt: now(),
    tokenHash: id('th'),
  };
}

/** A chat message record at `position` of `meta`'s stream, as the appender builds it. */
function message(
  meta: StreamMeta,
  generation: number,
  position: number,
  operationId: string,
  recordIndex: number,
  text: string,
): StoredRecord {
  return {
    streamId: meta.streamId,
    generation: String(generation),
    position: String(position),
    wrapper: {
      version: 2,
      chatId: meta.chatId,
      authorAgentId: meta.authorAgentId,
      operationId,
      recordIndex,
      type: 'chat.message',
      message: {
        chatId: meta.chatId,
        fromAgentId: meta.authorAgentId,
        toAgentId: meta.peerAgentId,
        clientMessageId: `cm-${operationId}-${recordIndex}`,
        content: text,
        contentSha256: 'sha-' + text,
        signature: { kid: 'kid-1', alg: 'ES256', value: 'sig-' + text, createdAt: now() },
      },
    },
  };
}

/** The append change of `texts` decided on `head`, with one clientMessageId per message. */
function appendOf(head: StreamMeta, texts: string[], operationId = id('op-')) {
  const next = cloneMeta(head);
  const from = head.nextPosition;
  const records = texts.map((t, i) => message(head, head.generation, from + i, operationId, i, t));
  next.nextPosition = from + texts.length;
  const operation: StoredOperation = {
    operationId,
    generation: head.generation,
    firstPosition: from,
    nextPosition: next.nextPosition,
    committedAt: now(),
    requestDigest: 'digest-' + operationId,
    redactions: [],
  };
  const messageIds = records.map((r, i): [string, number] => [`cm-${operationId}-${i}`, from + i]);
  return { kind: 'append' as const, expect: expectOf(head), next, records, operation, messageIds, ready: null };
}

function claimOf(head: StreamMeta) {
  const next = cloneMeta(head);
  const epoch = head.writer.epoch + 1;
  const claimedAt = now();
  const fence: StoredRecord = {
    streamId: head.streamId,
    generation: String(head.generation),
    position: String(head.nextPosition),
    wrapper: {
      version: 2,
      chatId: head.chatId,
      authorAgentId: head.authorAgentId,
      operationId: `fence.${epoch}`,
      recordIndex: 0,
      type: 'chat.writer-fence',
      fence: { epoch: String(epoch), claimedAt, replaced: head.writer.active },
    },
  };
  next.writer = { epoch, claimedAt, active: true, tokenHash: id('ct') };
  next.nextPosition = head.nextPosition + 1;
  return { kind: 'claim' as const, expect: expectOf(head), next, fence };
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

function ok(outcome: CommitOutcome | { status: string }): void {
  expect(outcome).toEqual({ status: 'ok' });
}

/** Register the conformance suite for one backend. */
export function portConformance(name: string, factory: PortFactory): void {
  describe(`storage port conformance: ${name}`, () => {
    const open: PortUnderTest[] = [];
    afterEach(async () => {
      for (const p of open.splice(0)) await p.close();
    });
    const fresh = async () => {
      const p = await factory();
      open.push(p);
      return p;
    };

    /** Two agents and their chat, created through the port; returns both stream heads. */
    async function chatOf(store: StorePort) {
      const [a, b] = [agentRow(), agentRow()].sort((x, y) => (x.id < y.id ? -1 : 1)) as [AgentRow, AgentRow];
      ok(await outcomeOf(store.directory.createAgent(a)));
      ok(await outcomeOf(store.directory.createAgent(b)));
      const row: ChatRow = { id: id('chat_'), agentAId: a.id, agentBId: b.id, createdAt: now() };
      const heads = [newStreamMeta(row.id, a.id, b.id, row.createdAt), newStreamMeta(row.id, b.id, a.id, row.createdAt)] as const;
      ok(await outcomeOf(store.directory.createChat(row, heads)));
      const head = (s: StreamMeta) => {
        const h = store.streams.head(s.streamId, 'admitted');
        if (!h) throw new Error(`no head for ${s.streamId}`);
        return h;
      };
      return { a, b, row, mine: () => head(heads[0]), theirs: () => head(heads[1]) };
    }

    describe('chats: create-or-find, one per pair', () => {
      it('creates the chat with its pair, memberships and both empty heads', async () => {
        const { store } = await fresh();
        const { a, b, row, mine, theirs } = await chatOf(store);
        expect(store.directory.chat(row.id)).toEqual(row);
        expect(store.directory.chatOfPair(a.id, b.id, 'committed')).toBe(row.id);
        expect(mine()).toMatchObject({ streamId: makeStreamId(row.id, a.id), generation: 1, firstPosition: 0, nextPosition: 0 });
        expect(theirs().authorAgentId).toBe(b.id);
        expect(store.streams.head(mine().streamId, 'committed')).toEqual(mine());
        expect(await store.directory.chatIds(a.id, { limit: 10 })).toEqual([row.id]);
        expect(await store.directory.chatIds(undefined, { limit: 10 })).toEqual([row.id]);
        expect(store.counts()).toMatchObject({ agents: 2, chats: 1, streams: 2 });
      });

      it('a second create of the pair is a duplicate naming the first chat, in the same turn or later', async () => {
        const { store } = await fresh();
        const { a, b, row } = await chatOf(store);
        const again: ChatRow = { id: id('chat_'), agentAId: a.id, agentBId: b.id, createdAt: now() };
        const heads = [newStreamMeta(again.id, a.id, b.id, now()), newStreamMeta(again.id, b.id, a.id, now())] as const;
        expect(await outcomeOf(store.directory.createChat(again, heads))).toEqual({ status: 'duplicate', existing: row.id });
        expect(store.directory.chat(again.id)).toBeUndefined();
        expect(store.streams.head(heads[0].streamId, 'committed')).toBeUndefined();

        // Two creates of a new pair admitted in one turn: exactly one chat.
        const [c, d] = [agentRow(), agentRow()].sort((x, y) => (x.id < y.id ? -1 : 1)) as [AgentRow, AgentRow];
        ok(await outcomeOf(store.directory.createAgent(c)));
        ok(await outcomeOf(store.directory.createAgent(d)));
        const rows = [0, 1].map((): ChatRow => ({ id: id('chat_'), agentAId: c.id, agentBId: d.id, createdAt: now() }));
        const outcomes = await Promise.all(
          rows.map((r) =>
            outcomeOf(store.directory.createChat(r, [newStreamMeta(r.id, c.id, d.id, now()), newStreamMeta(r.id, d.id, c.id, now())])),
          ),
        );
        expect(outcomes).toEqual([{ status: 'ok' }, { status: 'duplicate', existing: rows[0]?.id }]);
        expect(await store.directory.chatIds(c.id, { limit: 10 })).toEqual([rows[0]?.id]);
      });
    });

    describe('appends: compare-and-append', () => {
      it('an append decided on the head commits its records, operation, log entry and message ids; reads are exact', async () => {
        const { store } = await fresh();
        const { mine } = await chatOf(store);
        const change = appendOf(mine(), ['one', 'two', 'three']);
        ok(await outcomeOf(store.streams.admit(change)));
        const head = mine();
        expect(head.nextPosition).toBe(3);
        expect(store.streams.head(head.streamId, 'committed')?.nextPosition).toBe(3);
        const read = await collect(store.streams.records(head, 1, 0, 3));
        expect(read.map((r) => r.position)).toEqual([0, 1, 2]);
        expect(read.map((r) => r.record)).toEqual(change.records);
        expect(read.every((r) => r.bytes > 0)).toBe(true);
        expect((await collect(store.streams.records(head, 1, 1, 3))).map((r) => r.position)).toEqual([1, 2]);
        expect((await collect(store.streams.records(head, 1, 0, 3, { reverse: true }))).map((r) => r.position)).toEqual([2, 1, 0]);
        expect((await collect(store.streams.records(head, 1, 0, 3, { limit: 2 }))).map((r) => r.position)).toEqual([0, 1]);
        expect(await collect(store.streams.records(head, 1, 3, 10))).toEqual([]);
        expect(await store.streams.record(head, 1, 2)).toEqual(change.records[2]);
        expect(await store.streams.record(head, 1, 3)).toBeUndefined();
        expect(store.streams.operation(head.streamId, change.operation.operationId)).toEqual(change.operation);
        expect(await store.streams.findOperation(head.streamId, change.operation.operationId)).toEqual(change.operation);
        expect(await store.streams.operationStatus(head.streamId, change.operation.operationId)).toEqual({
          state: 'committed',
          operation: change.operation,
        });
        expect(await store.streams.operationStatus(head.streamId, 'never-sent')).toEqual({ state: 'absent' });
        expect(store.streams.messagePosition(head.streamId, 1, 'cm-' + change.operation.operationId + '-1')).toBe(1);
        expect(await collect(store.streams.opLog(head.streamId))).toEqual([
          { generation: 1, position: 0, operationId: change.operation.operationId },
        ]);
        expect(store.counts().records).toBe(3);
      });

      it('a second append decided on the same head is stale, with the current head, and writes nothing', async () => {
        const { store } = await fresh();
        const { mine } = await chatOf(store);
        const decidedOn = mine();
        const first = appendOf(decidedOn, ['a']);
        const second = appendOf(decidedOn, ['b']);
        const [o1, o2] = await Promise.all([outcomeOf(store.streams.admit(first)), outcomeOf(store.streams.admit(second))]);
        ok(o1);
        expect(o2.status).toBe('stale');
        expect(o2.status === 'stale' ? o2.head?.nextPosition : null).toBe(1);
        expect((await collect(store.streams.records(decidedOn, 1, 0, 5))).map((r) => r.record)).toEqual(first.records);
        expect(await store.streams.findOperation(decidedOn.streamId, second.operation.operationId)).toBeUndefined();
        // Decided again on the head it was given, it commits.
        ok(await outcomeOf(store.streams.admit(appendOf(mine(), ['b'], second.operation.operationId))));
        expect(mine().nextPosition).toBe(2);
      });

      it('group commit: changes of one turn commit together, and a stale one refuses only itself', async () => {
        const { store } = await fresh();
        const x = await chatOf(store);
        const y = await chatOf(store);
        const x0 = x.mine();
        const okX = appendOf(x0, ['x1']);
        const staleX = appendOf(x0, ['x-stale']);
        const okY = appendOf(y.mine(), ['y1']);
        const okY2 = appendOf(y.theirs(), ['y2']);
        const outcomes = await Promise.all([okX, staleX, okY, okY2].map((c) => outcomeOf(store.streams.admit(c))));
        expect(outcomes.map((o) => o.status)).toEqual(['ok', 'stale', 'ok', 'ok']);
        expect(x.mine().nextPosition).toBe(1);
        expect(y.mine().nextPosition).toBe(1);
        expect(y.theirs().nextPosition).toBe(1);
        expect((await collect(store.streams.records(x0, 1, 0, 5))).map((r) => r.record)).toEqual(okX.records);
      });

      it('group commit: changes of one stream admitted in one turn, each on the one before, commit in order', async () => {
        // On PostgreSQL these are layers of one group: BEGIN, a statement a layer and COMMIT,
        // pipelined; a layer sent out of order would find its head unmoved and be refused.
        const { store } = await fresh();
        const x = await chatOf(store);
        const y = await chatOf(store);
        const changes = [];
        const commits = [];
        for (const t of ['x1', 'x2', 'x3']) {
          const c = appendOf(x.mine(), [t]);
          changes.push(c);
          commits.push(outcomeOf(store.streams.admit(c)));
        }
        const other = appendOf(y.mine(), ['y1']);
        commits.push(outcomeOf(store.streams.admit(other)));
        expect((await Promise.all(commits)).map((o) => o.status)).toEqual(['ok', 'ok', 'ok', 'ok']);
        expect(store.streams.head(x.mine().streamId, 'committed')?.nextPosition).toBe(3);
        const stored = await collect(store.streams.records(x.mine(), 1, 0, 5));
        expect(stored.map((r) => r.record)).toEqual(changes.flatMap((c) => c.records));
        const log = await collect(store.streams.opLog(x.mine().streamId));
        expect(log.map((e) => e.operationId)).toEqual(changes.map((c) => c.operation.operationId));
      });

      it('an operation id is taken forever: a later append with it is a duplicate naming the stored operation', async () => {
        const { store } = await fresh();
        const { mine } = await chatOf(store);
        const first = appendOf(mine(), ['a', 'b']);
        ok(await outcomeOf(store.streams.admit(first)));
        ok(await outcomeOf(store.streams.admit(appendOf(mine(), ['c']))));
        const reused = appendOf(mine(), ['other'], first.operation.operationId);
        expect(await outcomeOf(store.streams.admit(reused))).toEqual({
          status: 'duplicate',
          what: 'operation',
          operation: first.operation,
        });
        expect(mine().nextPosition).toBe(3);
        // Still taken after the stream moved past its records' generation start and was trimmed
        // only partly (an operation is answered while its records exist).
        const head = mine();
        ok(
          await outcomeOf(
            store.streams.admit({
              kind: 'trim',
              expect: expectOf(head),
              next: { ...cloneMeta(head), firstPosition: 1 },
              fromPosition: 0,
            }),
          ),
        );
        await store.streams.sweepTrimmed(head.streamId, 1, 1);
        expect(await store.streams.findOperation(head.streamId, first.operation.operationId)).toEqual(first.operation);
        expect((await outcomeOf(store.streams.admit(appendOf(mine(), ['x'], first.operation.operationId)))).status).toBe('duplicate');
      });

      it('a clientMessageId is unique in its generation: a duplicate names its position; the next generation takes it again', async () => {
        const { store } = await fresh();
        const { mine } = await chatOf(store);
        const first = appendOf(mine(), ['a', 'b']);
        ok(await outcomeOf(store.streams.admit(first)));
        const [, [takenId, takenAt] = ['', 0]] = first.messageIds;
        const clash = appendOf(mine(), ['c']);
        clash.messageIds = [[takenId, mine().nextPosition]];
        expect(await outcomeOf(store.streams.admit(clash))).toEqual({
          status: 'duplicate',
          what: 'messageId',
          clientMessageId: takenId,
          position: takenAt,
        });
        expect(mine().nextPosition).toBe(2);
        expect(await store.streams.findOperation(mine().streamId, clash.operation.operationId)).toBeUndefined();

        const head = mine();
        const reset = cloneMeta(head);
        reset.sealed.push({ generation: 1, firstPosition: 0, nextPosition: 2, sealedAt: now(), reason: 'test' });
        reset.generation = 2;
        reset.firstPosition = 0;
        reset.nextPosition = 0;
        reset.writer = { ...reset.writer, epoch: head.writer.epoch + 1, active: false, tokenHash: null };
        ok(await outcomeOf(store.streams.admit({ kind: 'reset', expect: expectOf(head), next: reset })));
        const again = appendOf(mine(), ['c']);
        again.messageIds = [[takenId, 0]];
        ok(await outcomeOf(store.streams.admit(again)));
        expect(store.streams.messagePosition(head.streamId, 2, takenId)).toBe(0);
        expect(store.streams.messagePosition(head.streamId, 1, takenId)).toBe(takenAt);
      });
    });

    describe('claims fence', () => {
      it('a claim moves the epoch and writes its fence; an append decided on the old epoch is stale', async () => {
        const { store } = await fresh();
        const { mine } = await chatOf(store);
        ok(await outcomeOf(store.streams.admit(appendOf(mine(), ['a']))));
        const before = mine();
        const late = appendOf(before, ['late']);
        const claim = claimOf(before);
        // The claim is admitted first; the append decided before it must not pass.
        const [c, a] = await Promise.all([outcomeOf(store.streams.admit(claim)), outcomeOf(store.streams.admit(late))]);
        ok(c);
        expect(a.status).toBe('stale');
        expect(mine()).toMatchObject({ nextPosition: 2, writer: { epoch: 1, active: true } });
        expect(await store.streams.record(before, 1, 1)).toEqual(claim.fence);
        // An append decided on an old epoch is stale even at the right position.
        const head = mine();
        const oldEpoch = appendOf(head, ['b']);
        oldEpoch.expect = { ...oldEpoch.expect, writerEpoch: 0 };
        expect((await outcomeOf(store.streams.admit(oldEpoch))).status).toBe('stale');
        ok(await outcomeOf(store.streams.admit(appendOf(mine(), ['b']))));
        const release = cloneMeta(mine());
        release.writer = { ...release.writer, active: false, tokenHash: null };
        ok(await outcomeOf(store.streams.admit({ kind: 'release', expect: expectOf(mine()), next: release })));
        expect(store.streams.head(head.streamId, 'committed')?.writer).toMatchObject({ epoch: 1, active: false, tokenHash: null });
        expect(store.counts().records).toBe(3);
      });
    });

    describe('trims and resets', () => {
      it('a trim hides the records below the new start; the sweep keeps an operation cut in two and drops the rest', async () => {
        const { store } = await fresh();
        const { mine } = await chatOf(store);
        const op1 = appendOf(mine(), ['a', 'b']);
        ok(await outcomeOf(store.streams.admit(op1)));
        const op2 = appendOf(mine(), ['c', 'd']);
        ok(await outcomeOf(store.streams.admit(op2)));
        const head = mine();
        const next = { ...cloneMeta(head), firstPosition: 3 };
        // A trim decided on an old retained start is stale.
        expect((await outcomeOf(store.streams.admit({ kind: 'trim', expect: expectOf(head), next, fromPosition: 1 }))).status).toBe(
          'stale',
        );
        ok(await outcomeOf(store.streams.admit({ kind: 'trim', expect: expectOf(head), next, fromPosition: 0 })));
        expect(store.streams.head(head.streamId, 'committed')?.firstPosition).toBe(3);
        await store.streams.sweepTrimmed(head.streamId, 1, 3);
        expect((await collect(store.streams.records(head, 1, 0, 4))).map((r) => r.position)).toEqual([3]);
        expect(await store.streams.findOperation(head.streamId, op1.operation.operationId)).toBeUndefined();
        expect(await store.streams.findOperation(head.streamId, op2.operation.operationId)).toEqual(op2.operation);
        expect((await collect(store.streams.opLog(head.streamId))).map((e) => e.operationId)).toEqual([op2.operation.operationId]);
        expect(store.streams.messagePosition(head.streamId, 1, op1.messageIds[0]?.[0] ?? '')).toBeUndefined();
        expect(store.counts().records).toBe(1);
        // Idempotent.
        expect(await store.streams.sweepTrimmed(head.streamId, 1, 3)).toEqual({ records: 0, operations: 0, messageIds: 0 });
      });

      it('a trim deletes at most TRIM_DELETE_BATCH records in its commit (the one carrying every other append); the sweep deletes the rest', async () => {
        const { store } = await fresh();
        const { mine } = await chatOf(store);
        const n = TRIM_DELETE_BATCH + 2;
        ok(
          await outcomeOf(
            store.streams.admit(
              appendOf(
                mine(),
                Array.from({ length: n }, (_, i) => `m${i}`),
              ),
            ),
          ),
        );
        const head = mine();
        ok(
          await outcomeOf(
            store.streams.admit({ kind: 'trim', expect: expectOf(head), next: { ...cloneMeta(head), firstPosition: n }, fromPosition: 0 }),
          ),
        );
        // Readers never see them (they read from the head's firstPosition); the store still holds the rest.
        expect((await collect(store.streams.records(head, 1, 0, n))).map((r) => r.position)).toEqual([n - 2, n - 1]);
        expect((await store.streams.sweepTrimmed(head.streamId, 1, n)).records).toBe(2);
        expect((await store.streams.sweepTrimmed(head.streamId, 1, n)).records).toBe(0);
      });

      it('a reset seals the generation and starts the next at 0; the sealed records stay readable', async () => {
        const { store } = await fresh();
        const { mine } = await chatOf(store);
        const op = appendOf(mine(), ['a', 'b']);
        ok(await outcomeOf(store.streams.admit(op)));
        const head = mine();
        const next = cloneMeta(head);
        next.sealed.push({ generation: 1, firstPosition: 0, nextPosition: 2, sealedAt: now(), reason: 'test' });
        Object.assign(next, { generation: 2, firstPosition: 0, nextPosition: 0 });
        next.writer = { ...next.writer, epoch: 1, active: false, tokenHash: null };
        const stale = appendOf(head, ['late']);
        const [r, a] = await Promise.all([
          outcomeOf(store.streams.admit({ kind: 'reset', expect: expectOf(head), next })),
          outcomeOf(store.streams.admit(stale)),
        ]);
        ok(r);
        expect(a.status).toBe('stale');
        expect(store.streams.head(head.streamId, 'committed')).toMatchObject({ generation: 2, firstPosition: 0, nextPosition: 0 });
        expect(store.streams.head(head.streamId, 'committed')?.sealed).toHaveLength(1);
        expect((await collect(store.streams.records(head, 1, 0, 2))).map((x) => x.record)).toEqual(op.records);
        const g2 = appendOf(mine(), ['new']);
        ok(await outcomeOf(store.streams.admit(g2)));
        expect((await collect(store.streams.records(head, 2, 0, 5))).map((x) => x.record)).toEqual(g2.records);
        const all = await collect(store.streams.allRecords(head));
        expect(all.map((x) => [x.generation, x.position])).toEqual([
          [1, 0],
          [1, 1],
          [2, 0],
        ]);
        expect(all.every((x) => x.record !== undefined)).toBe(true);
      });
    });

    describe('operation lookup and the operation log', () => {
      it('the log lists operations in commit order, paged by position', async () => {
        const { store } = await fresh();
        const { mine } = await chatOf(store);
        const ids: string[] = [];
        for (let i = 0; i < 5; i++) {
          const c = appendOf(mine(), [`m${i}`]);
          ids.push(c.operation.operationId);
          ok(await outcomeOf(store.streams.admit(c)));
        }
        const streamId = mine().streamId;
        expect((await collect(store.streams.opLog(streamId))).map((e) => e.operationId)).toEqual(ids);
        const page = await collect(store.streams.opLog(streamId, { limit: 2 }));
        expect(page).toEqual([
          { generation: 1, position: 0, operationId: ids[0] },
          { generation: 1, position: 1, operationId: ids[1] },
        ]);
        const rest = await collect(store.streams.opLog(streamId, { after: { generation: 1, position: 1 } }));
        expect(rest.map((e) => e.operationId)).toEqual(ids.slice(2));
        const bounded = await collect(
          store.streams.opLog(streamId, { after: { generation: 1, position: 0 }, before: { generation: 1, position: 3 } }),
        );
        expect(bounded.map((e) => e.operationId)).toEqual(ids.slice(1, 3));
        expect((await collect(store.streams.operationIds(streamId))).sort()).toEqual([...ids].sort());
        expect((await collect(store.streams.messageIds(streamId, 1))).length).toBe(5);
        expect(await collect(store.streams.streamIds())).toContain(streamId);
      });
    });

    describe('the directory', () => {
      it('agents: unique usernames, the token index follows the current token, pages in id order', async () => {
        const { store } = await fresh();
        const a = agentRow('alice');
        ok(await outcomeOf(store.directory.createAgent(a)));
        expect(await outcomeOf(store.directory.createAgent({ ...agentRow('alice') }))).toEqual({ status: 'duplicate', existing: a.id });
        expect(store.directory.agent(a.id, 'committed')).toEqual(a);
        expect(store.directory.agentIdByUsername('alice', 'committed')).toBe(a.id);
        expect(store.directory.agentIdByToken(a.tokenHash)).toBe(a.id);
        const rotated = { ...a, tokenHash: id('th') };
        ok(await outcomeOf(store.directory.updateAgent(rotated, a)));
        expect(store.directory.agent(a.id, 'committed')).toEqual(rotated);
        expect(store.directory.agentIdByToken(a.tokenHash)).toBeUndefined();
        expect(store.directory.agentIdByToken(rotated.tokenHash)).toBe(a.id);
        // Disabled: its token finds no enabled agent (PostgreSQL deletes the index entry, which
        // its commits check; LevelDB keeps it, and every session check reads the row).
        const disabled = { ...rotated, disabled: true };
        ok(await outcomeOf(store.directory.updateAgent(disabled, rotated)));
        expect(store.directory.agent(a.id, 'committed')).toEqual(disabled);
        const holder = store.directory.agentIdByToken(rotated.tokenHash);
        expect(holder === undefined || store.directory.agent(holder, 'committed')?.disabled === true).toBe(true);
        const more = [agentRow(), agentRow(), agentRow()];
        for (const r of more) ok(await outcomeOf(store.directory.createAgent(r)));
        const sorted = [a.id, ...more.map((r) => r.id)].sort();
        const first = await store.directory.agents({ limit: 2 });
        expect(first.map((r) => r.id)).toEqual(sorted.slice(0, 2));
        const second = await store.directory.agents({ after: first[1]?.id ?? '', limit: 10 });
        expect(second.map((r) => r.id)).toEqual(sorted.slice(2));
        expect(store.counts().agents).toBe(4);
      });

      it('grants: one per direction, overwritten in place, deleted, listed by (agent, peer)', async () => {
        const { store } = await fresh();
        const [a, b, c] = [agentRow(), agentRow(), agentRow()];
        for (const r of [a, b, c]) ok(await outcomeOf(store.directory.createAgent(r)));
        const g = (x: AgentRow, y: AgentRow) => ({ agentId: x.id, peerAgentId: y.id, grantedAt: now() });
        ok(await outcomeOf(store.directory.putGrant(g(a, b))));
        ok(await outcomeOf(store.directory.putGrant(g(a, c))));
        ok(await outcomeOf(store.directory.putGrant(g(b, a))));
        expect(store.directory.grant(a.id, b.id, 'admitted')?.peerAgentId).toBe(b.id);
        expect(store.directory.grant(b.id, c.id, 'admitted')).toBeUndefined();
        const own = await store.directory.grants(a.id, { limit: 10 });
        expect(own.map((x) => x.peerAgentId)).toEqual([b.id, c.id].sort());
        const all = await store.directory.grants(undefined, { limit: 10 });
        expect(all.map((x) => [x.agentId, x.peerAgentId])).toEqual(
          [
            [a.id, b.id],
            [a.id, c.id],
            [b.id, a.id],
          ].sort((x, y) => (x.join('/') < y.join('/') ? -1 : 1)),
        );
        const firstTwo = all.slice(0, 2);
        const after = firstTwo[1];
        if (!after) throw new Error('no grant');
        expect(await store.directory.grants(undefined, { after: [after.agentId, after.peerAgentId], limit: 10 })).toEqual(all.slice(2));
        ok(await outcomeOf(store.directory.deleteGrant(a.id, b.id)));
        expect(store.directory.grant(a.id, b.id, 'admitted')).toBeUndefined();
        expect(store.directory.grant(a.id, b.id, 'committed')).toBeUndefined();
        expect(await store.directory.damaged()).toEqual({ tokenIndex: [], grants: [] });
      });
    });

    describe('the directory: admitted and committed state', () => {
      it('a write is visible in the admitted view at once and in the committed view once durable; unique keys are taken at admission', async () => {
        const { store } = await fresh();
        const d = store.directory;
        const a = agentRow('dora');
        const created = outcomeOf(d.createAgent(a));
        // Admitted in the same turn, before the first is durable: the username is already taken.
        const twin = outcomeOf(d.createAgent(agentRow('dora')));
        expect(d.agentPending(a.id)).toBe(true);
        expect(d.agent(a.id, 'admitted')).toEqual(a);
        expect(d.agent(a.id, 'committed')).toBeUndefined();
        expect(d.agentIdByUsername('dora', 'admitted')).toBe(a.id);
        expect(d.agentIdByUsername('dora', 'committed')).toBeUndefined();
        ok(await created);
        expect(await twin).toEqual({ status: 'duplicate', existing: a.id });
        expect(d.agentPending(a.id)).toBe(false);
        expect(d.agent(a.id, 'committed')).toEqual(a);
        expect(d.agentIdByUsername('dora', 'committed')).toBe(a.id);
        expect(store.counts().agents).toBe(1);

        const b = agentRow();
        ok(await outcomeOf(d.createAgent(b)));
        const grant = { agentId: a.id, peerAgentId: b.id, grantedAt: now() };
        const put = outcomeOf(d.putGrant(grant));
        expect(d.grantPending(a.id, b.id)).toBe(true);
        expect(d.grant(a.id, b.id, 'admitted')).toEqual(grant);
        expect(d.grant(a.id, b.id, 'committed')).toBeUndefined();
        await d.grantDurable(a.id, b.id);
        expect(d.grant(a.id, b.id, 'committed')).toEqual(grant);
        ok(await put);
        expect(d.grantPending(a.id, b.id)).toBe(false);
        const removed = outcomeOf(d.deleteGrant(a.id, b.id));
        expect(d.grant(a.id, b.id, 'admitted')).toBeUndefined();
        expect(d.grant(a.id, b.id, 'committed')).toEqual(grant);
        ok(await removed);
        expect(d.grant(a.id, b.id, 'committed')).toBeUndefined();

        const [x, y] = [a, b].sort((p, q) => (p.id < q.id ? -1 : 1)) as [AgentRow, AgentRow];
        const row: ChatRow = { id: id('chat_'), agentAId: x.id, agentBId: y.id, createdAt: now() };
        const chat = outcomeOf(d.createChat(row, [newStreamMeta(row.id, x.id, y.id, now()), newStreamMeta(row.id, y.id, x.id, now())]));
        expect(d.chatOfPair(x.id, y.id, 'admitted')).toBe(row.id);
        expect(d.chatOfPair(x.id, y.id, 'committed')).toBeUndefined();
        await d.pairDurable(x.id, y.id);
        expect(d.chatOfPair(x.id, y.id, 'committed')).toBe(row.id);
        expect(d.chat(row.id)).toEqual(row);
        ok(await chat);
      });

      it("an agent's chats are paged in chat id order", async () => {
        const { store } = await fresh();
        const d = store.directory;
        const a = agentRow();
        ok(await outcomeOf(d.createAgent(a)));
        const ids: string[] = [];
        for (let i = 0; i < 3; i++) {
          const peer = agentRow();
          ok(await outcomeOf(d.createAgent(peer)));
          const [x, y] = [a, peer].sort((p, q) => (p.id < q.id ? -1 : 1)) as [AgentRow, AgentRow];
          const row: ChatRow = { id: id('chat_'), agentAId: x.id, agentBId: y.id, createdAt: now() };
          ok(await outcomeOf(d.createChat(row, [newStreamMeta(row.id, x.id, y.id, now()), newStreamMeta(row.id, y.id, x.id, now())])));
          ids.push(row.id);
        }
        ids.sort();
        const first = await d.chatIds(a.id, { limit: 2 });
        expect(first).toEqual(ids.slice(0, 2));
        expect(await d.chatIds(a.id, { after: first[1] ?? '', limit: 10 })).toEqual(ids.slice(2));
        expect(await d.chatIds(undefined, { limit: 10 })).toEqual(ids);
        expect(store.counts()).toMatchObject({ agents: 4, chats: 3, streams: 6 });
      });
    });

    // The lists at the size of the daemon suites (test/integration/list-pagination.test.ts, which
    // runs on LevelDB only): more rows than one page of the largest limit (500), created in
    // concurrent groups as a busy daemon commits them, and paged to the end. The cursors, limits
    // and answers above the port are backend-neutral; these are what a backend must get right.
    describe('lists longer than a page', () => {
      /** Every page of `page` with `limit`, `after` taken from the last entry of the one before. */
      async function allPages<T, A>(page: (after: A | undefined) => Promise<T[]>, cursor: (last: T) => A, limit: number) {
        const pages: T[][] = [];
        let after: A | undefined;
        for (;;) {
          const got = await page(after);
          expect(got.length).toBeLessThanOrEqual(limit);
          if (got.length === 0) return pages;
          pages.push(got);
          if (got.length < limit) return pages;
          after = cursor(got.at(-1)!);
        }
      }

      it('1,200 agents created 64 at a time come back in pages of 500, each once, in id order', async () => {
        const { store } = await fresh();
        const rows = Array.from({ length: 1_200 }, (_, i) => agentRow(`pg${String(i).padStart(5, '0')}-${id('')}`));
        for (let i = 0; i < rows.length; i += 64)
          for (const o of await Promise.all(rows.slice(i, i + 64).map((r) => outcomeOf(store.directory.createAgent(r))))) ok(o);
        const pages = await allPages<AgentRow, string>(
          (after) => store.directory.agents({ ...(after === undefined ? {} : { after }), limit: 500 }),
          (last) => last.id,
          500,
        );
        expect(pages.map((p) => p.length)).toEqual([500, 500, 200]);
        expect(pages.flat().map((r) => r.id)).toEqual(rows.map((r) => r.id).sort());
        expect(pages.flat()[777]).toEqual(rows.find((r) => r.id === pages.flat()[777]?.id));
        expect(store.counts().agents).toBe(1_200);
      });

      it("520 grants of one agent, and every grant, page by (agent, peer); another agent's stay out of its list", async () => {
        const { store } = await fresh();
        const d = store.directory;
        const [a, other] = [agentRow(), agentRow()];
        ok(await outcomeOf(d.createAgent(a)));
        ok(await outcomeOf(d.createAgent(other)));
        const peers = Array.from({ length: 520 }, () => agentRow());
        for (let i = 0; i < peers.length; i += 64)
          for (const o of await Promise.all(peers.slice(i, i + 64).map((r) => outcomeOf(d.createAgent(r))))) ok(o);
        for (let i = 0; i < peers.length; i += 64)
          for (const o of await Promise.all(
            peers.slice(i, i + 64).map((p) => outcomeOf(d.putGrant({ agentId: a.id, peerAgentId: p.id, grantedAt: now() }))),
          ))
            ok(o);
        ok(await outcomeOf(d.putGrant({ agentId: other.id, peerAgentId: a.id, grantedAt: now() })));
        const cursor = (g: { agentId: string; peerAgentId: string }): [string, string] => [g.agentId, g.peerAgentId];
        const own = await allPages((after) => d.grants(a.id, { ...(after === undefined ? {} : { after }), limit: 500 }), cursor, 500);
        expect(own.map((p) => p.length)).toEqual([500, 20]);
        expect(own.flat().map((g) => g.peerAgentId)).toEqual(peers.map((p) => p.id).sort());
        expect(own.flat().every((g) => g.agentId === a.id)).toBe(true);
        const every = await allPages(
          (after) => d.grants(undefined, { ...(after === undefined ? {} : { after }), limit: 500 }),
          cursor,
          500,
        );
        expect(every.flat().map((g) => `${g.agentId}/${g.peerAgentId}`)).toEqual(
          [...peers.map((p) => `${a.id}/${p.id}`), `${other.id}/${a.id}`].sort(),
        );
      });

      it('an agent in 520 chats: its chat ids and every chat id in pages of 500, in chat id order', async () => {
        const { store } = await fresh();
        const d = store.directory;
        const a = agentRow();
        ok(await outcomeOf(d.createAgent(a)));
        const peers = Array.from({ length: 520 }, () => agentRow());
        for (let i = 0; i < peers.length; i += 64)
          for (const o of await Promise.all(peers.slice(i, i + 64).map((r) => outcomeOf(d.createAgent(r))))) ok(o);
        const chatIds: string[] = [];
        for (let i = 0; i < peers.length; i += 64) {
          const outcomes = await Promise.all(
            peers.slice(i, i + 64).map((peer) => {
              const [x, y] = [a, peer].sort((p, q) => (p.id < q.id ? -1 : 1)) as [AgentRow, AgentRow];
              const row: ChatRow = { id: id('chat_'), agentAId: x.id, agentBId: y.id, createdAt: now() };
              chatIds.push(row.id);
              return outcomeOf(d.createChat(row, [newStreamMeta(row.id, x.id, y.id, now()), newStreamMeta(row.id, y.id, x.id, now())]));
            }),
          );
          for (const o of outcomes) ok(o);
        }
        chatIds.sort();
        const own = await allPages<string, string>(
          (after) => d.chatIds(a.id, { ...(after === undefined ? {} : { after }), limit: 500 }),
          (c) => c,
          500,
        );
        expect(own.map((p) => p.length)).toEqual([500, 20]);
        expect(own.flat()).toEqual(chatIds);
        const every = await allPages<string, string>(
          (after) => d.chatIds(undefined, { ...(after === undefined ? {} : { after }), limit: 500 }),
          (c) => c,
          500,
        );
        expect(every.flat()).toEqual(chatIds);
        expect(store.counts()).toMatchObject({ agents: 521, chats: 520, streams: 1_040 });
      });

      it('520 operations of one stream: the log in pages of 500 by position, each once, in commit order', async () => {
        const { store } = await fresh();
        const { mine } = await chatOf(store);
        const ids: string[] = [];
        for (let i = 0; i < 520; i++) {
          const c = appendOf(mine(), [`m${i}`]);
          ids.push(c.operation.operationId);
          ok(await outcomeOf(store.streams.admit(c)));
        }
        const streamId = mine().streamId;
        const pages = await allPages<
          { generation: number; position: number; operationId: string },
          { generation: number; position: number }
        >(
          async (after) => collect(store.streams.opLog(streamId, { ...(after === undefined ? {} : { after }), limit: 500 })),
          (e) => ({ generation: e.generation, position: e.position }),
          500,
        );
        expect(pages.map((p) => p.length)).toEqual([500, 20]);
        expect(pages.flat().map((e) => e.operationId)).toEqual(ids);
        expect(pages.flat().map((e) => e.position)).toEqual(ids.map((_, i) => i));
      });
    });

    describe('integrity marks and keys', () => {
      it('stores marks, replaces one per (stream, generation), and narrows a whole-stream mark', async () => {
        const { store } = await fresh();
        const mark = (generation: number | null, fromPosition: number): CorruptMark => ({
          streamId: 'chat_x:agt_y',
          generation,
          fromPosition,
          detail: 'test',
          detectedAt: now(),
        });
        await store.integrity.putMarks([mark(null, 0), mark(1, 5)]);
        await store.integrity.putMarks([mark(1, 3)]);
        const stored = await collect(store.integrity.marks());
        const byGeneration = (marks: CorruptMark[]) =>
          marks.map((m) => [m.generation, m.fromPosition]).sort((x, y) => (x[0] ?? -1) - (y[0] ?? -1));
        expect(byGeneration(stored)).toEqual([
          [null, 0],
          [1, 3],
        ]);
        await store.integrity.narrowMark('chat_x:agt_y', mark(2, 7));
        const narrowed = await collect(store.integrity.marks());
        expect(byGeneration(narrowed)).toEqual([
          [1, 3],
          [2, 7],
        ]);
      });

      it('publishes public key rows by kid', async () => {
        const { store } = await fresh();
        const row = { kid: 'k1', daemonId: 'd1', jwk: { kty: 'EC', crv: 'P-256', x: 'x', y: 'y' }, createdAt: now(), retiredAt: null };
        await store.keys.publish([row, { ...row, kid: 'k0' }]);
        await store.keys.publish([{ ...row, retiredAt: now() }]);
        const all = await store.keys.all();
        expect(all.map((r) => r.kid)).toEqual(['k0', 'k1']);
        expect(all[1]?.retiredAt).not.toBeNull();
      });
    });

    describe('failures', () => {
      it('a commit whose durability is unknown answers unknown, and the store then refuses writes with nothing written', async () => {
        const p = await fresh();
        if (!p.failNextCommit) return;
        const { store } = p;
        const made = await chatOf(store);
        const { mine } = made;
        await p.failNextCommit();
        // Two appends of two streams in the group that fails: each answered with an error of its own
        // (a caller adds its operation id to the error it is given).
        const [outcome, other] = await Promise.all([
          outcomeOf(store.streams.admit(appendOf(mine(), ['lost?']))),
          outcomeOf(store.streams.admit(appendOf(made.theirs(), ['lost too?']))),
        ]);
        expect(outcome.status).toBe('unknown');
        expect(other.status).toBe('unknown');
        expect(outcome.status === 'unknown' && other.status === 'unknown' && outcome.error !== other.error).toBe(true);
        expect(outcome.status === 'unknown' ? outcome.error : null).toMatchObject({
          type: 'STORAGE_FAILURE',
          details: { reason: 'WRITE_FAILED', outcome: 'unknown' },
        });
        // One wording on every backend: only the engine's cause differs.
        const [before, after] = writeFailed('CAUSE').message.split('CAUSE') as [string, string];
        const message = outcome.status === 'unknown' ? outcome.error.message : '';
        expect(message.startsWith(before) && message.endsWith(after), message).toBe(true);
        expect(store.readOnly).toBe(true);
        // Every write of either half is refused (READ_ONLY, nothing written), whichever half failed.
        const { a, b, row, theirs } = made;
        const refusals: Record<string, () => unknown> = {
          admit: () => store.streams.admit(appendOf(theirs(), ['after'])),
          createAgent: () => store.directory.createAgent(agentRow()),
          updateAgent: () => store.directory.updateAgent({ ...a, name: 'renamed' }, a),
          putGrant: () => store.directory.putGrant({ agentId: a.id, peerAgentId: b.id, grantedAt: now() }),
          deleteGrant: () => store.directory.deleteGrant(a.id, b.id),
          createChat: () => store.directory.createChat({ ...row, id: id('chat_') }, [theirs(), mine()]),
          assertWritable: () => {
            store.assertWritable();
          },
        };
        for (const [name, write] of Object.entries(refusals)) {
          let thrown: unknown;
          try {
            write();
          } catch (err) {
            thrown = err;
          }
          expect(thrown, name).toMatchObject({ type: 'STORAGE_FAILURE', details: { reason: 'READ_ONLY', outcome: 'not-written' } });
        }
        await expect(store.streams.sweepTrimmed(theirs().streamId, 1, 1)).rejects.toMatchObject({ details: { reason: 'READ_ONLY' } });
        expect(store.directory.agent(a.id, 'committed')?.name).toBe(a.name);
      });

      it('a closing store refuses every read (nothing read) and every write (nothing written) with SHUTTING_DOWN, in one wording', async () => {
        const p = await fresh();
        const { store } = p;
        const { a, mine } = await chatOf(store);
        const op = appendOf(mine(), ['a']);
        ok(await outcomeOf(store.streams.admit(op)));
        const head = mine();
        const { streamId } = head;
        open.splice(open.indexOf(p), 1);
        const closing = p.close();
        expect(store.stopping).toBe(true);
        const read = errors.shuttingDown(null, null);
        const refusedRead = { type: 'STORAGE_FAILURE', message: read.message, details: read.details };
        const reads: Record<string, () => Promise<unknown>> = {
          streamIds: () => collect(store.streams.streamIds()),
          records: () => collect(store.streams.records(head, 1, 0, 5)),
          record: () => store.streams.record(head, 1, 0),
          allRecords: () => collect(store.streams.allRecords(head)),
          operationStatus: () => store.streams.operationStatus(streamId, op.operation.operationId),
          findOperation: () => store.streams.findOperation(streamId, op.operation.operationId),
          opLog: () => collect(store.streams.opLog(streamId)),
          operationIds: () => collect(store.streams.operationIds(streamId)),
          messageIds: () => collect(store.streams.messageIds(streamId, 1)),
          approximateBytes: () => store.streams.approximateBytes(streamId),
          agents: () => store.directory.agents({ limit: 10 }),
          grants: () => store.directory.grants(undefined, { limit: 10 }),
          chatIds: () => store.directory.chatIds(a.id, { limit: 10 }),
          damaged: () => store.directory.damaged(),
        };
        // All asked at once, while the store closes (not after the engine is gone).
        const answers = await Promise.all(
          Object.entries(reads).map(([name, r]) =>
            Promise.resolve()
              .then(r)
              .then(
                () => ({ name, answered: true }),
                (err: unknown) => ({ name, err }),
              ),
          ),
        );
        for (const answer of answers) expect(answer, answer.name).toMatchObject({ err: refusedRead });
        expect(() => store.streams.head(streamId, 'committed')).toThrow(read.message);
        expect(() => store.directory.agent(a.id, 'committed')).toThrow(read.message);
        const late = appendOf(head, ['late']);
        const written = errors.shuttingDown(late.operation.operationId, 'not-written');
        const refusedWrite = { type: 'STORAGE_FAILURE', message: written.message, details: written.details };
        let thrown: unknown;
        try {
          await outcomeOf(store.streams.admit(late));
        } catch (err) {
          thrown = err;
        }
        expect(thrown).toMatchObject(refusedWrite);
        thrown = undefined;
        try {
          await outcomeOf(store.directory.createAgent(agentRow()));
        } catch (err) {
          thrown = err;
        }
        expect(thrown).toMatchObject({
          type: 'STORAGE_FAILURE',
          message: written.message,
          details: { reason: 'SHUTTING_DOWN', outcome: 'not-written' },
        });
        // The sweep deletes: a write, refused alike (record 0 is below 1: there is something to delete).
        await expect(store.streams.sweepTrimmed(streamId, 1, 1)).rejects.toMatchObject({
          message: errors.shuttingDown(null, 'not-written').message,
          details: { reason: 'SHUTTING_DOWN', outcome: 'not-written' },
        });
        await closing;
      });
    });
  });
}
