// Durability under SIGKILL (docs/protocol.md §6.2: "Every write is acknowledged only after it is on disk").
// Several writers append concurrently, each to its own stream with expectedPosition tracking;
// the daemon is SIGKILLed mid-flight, restarted, and every acknowledged append must be there,
// exactly where it was acknowledged, signed, and reported committed by operations.get.

import { beforeAll, describe, expect, it } from 'vitest';
import {
  type Wire,
  claim,
  clientMessageIdFor,
  connectAs,
  createPair,
  fetchKeys,
  messageProblems,
  ok,
  readAll,
  uniq,
  type TestPair,
  messageOf,
} from '../helpers/wire-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { expectWellFormedErrors } from '../helpers/error-shapes.js';
import { useDaemon } from '../helpers/use-daemon.js';

const WRITERS = 4;
const ROUNDS = 2;

interface Acked {
  operationId: string;
  firstPosition: string;
  nextPosition: string;
  messages: { messageId: string; content: string }[];
}

interface Uncertain {
  operationId: string;
  expectedPosition: string;
  messages: { messageId: string; content: string }[];
}

interface Writer {
  index: number;
  pair: TestPair;
  coordinatorToken: string;
  generation: string;
  next: string;
  acked: Acked[];
  uncertain: Uncertain[];
  /** Appends answered with an error: they must never have committed. */
  failed: Uncertain[];
  unexpected: unknown[];
}

// A process of its own: the SIGKILL mid-append is the subject (and SIGTERM's exit 0).
const { daemon, admin, restart } = useDaemon({ process: true });
const writers: Writer[] = [];

beforeAll(async () => {
  for (let i = 0; i < WRITERS; i++) {
    const pair = await createPair(admin(), daemon().socketPath, { grants: 'a-to-b' });
    const c = await claim(pair.a.client, pair.streamA);
    writers.push({
      index: i,
      pair,
      coordinatorToken: c.coordinatorToken,
      generation: c.generation,
      next: c.nextPosition,
      acked: [],
      uncertain: [],
      failed: [],
      unexpected: [],
    });
  }
}, 60_000);

let seq = 0;

/**
 * Appends in a loop until the connection dies; the in-flight append at that moment is uncertain.
 * With `errorsAllowed` (a graceful stop may fail in-flight appends, §2) an error answer ends the
 * loop and the operation must then never have committed.
 */
async function runWriter(w: Writer, client: Wire, errorsAllowed: boolean): Promise<void> {
  for (;;) {
    const n = 1 + (seq % 3);
    const messages = Array.from({ length: n }, () => {
      seq += 1;
      const messageId = `w${w.index}-m${seq}`;
      return { messageId, content: `writer ${w.index} message ${seq} ${'.'.repeat(seq % 50)}` };
    });
    const operationId = uniq(`crash-w${w.index}`);
    const expectedPosition = w.next;
    let r;
    try {
      r = await client.call(
        'streams.append',
        {
          streamId: w.pair.streamA,
          coordinatorToken: w.coordinatorToken,
          generation: w.generation,
          expectedPosition,
          operationId,
          records: messages.map((m) => ({ type: 'chat.message', ...m })),
        },
        20_000,
      );
    } catch {
      // Connection lost (or timed out) after sending: the outcome is unknown.
      w.uncertain.push({ operationId, expectedPosition, messages });
      return;
    }
    if (r.error) {
      if (!errorsAllowed) w.unexpected.push(r.error);
      w.failed.push({ operationId, expectedPosition, messages });
      return;
    }
    if (r.result!.firstPosition !== expectedPosition) w.unexpected.push({ wrongPosition: r.result, expectedPosition });
    w.acked.push({ operationId, firstPosition: r.result!.firstPosition, nextPosition: r.result!.nextPosition, messages });
    w.next = r.result!.nextPosition;
  }
}

/** Runs all writers, then stops the daemon with `stop` while appends are in flight, then restarts. */
async function round(stop: () => Promise<void>, errorsAllowed: boolean, minAcksPerWriter: number): Promise<number> {
  const clients = await Promise.all(writers.map((w) => connectAs(daemon().socketPath, w.pair.a.token)));
  const ackedBefore = totalAcked();
  const loops = writers.map((w, i) => runWriter(w, clients[i]!, errorsAllowed));
  // Let the writers get going, then stop while each has an append outstanding.
  await waitFor(
    () => totalAcked() - ackedBefore >= minAcksPerWriter * WRITERS,
    `${minAcksPerWriter * WRITERS} acknowledged appends`,
    20_000,
    20,
  );
  const openBefore = writers.reduce((n, w) => n + w.uncertain.length + w.failed.length, 0);
  await stop();
  await Promise.all(loops);
  const inFlight = writers.reduce((n, w) => n + w.uncertain.length + w.failed.length, 0) - openBefore;
  for (const w of writers) expect(w.unexpected, `writer ${w.index}`).toEqual([]);
  expect(totalAcked() - ackedBefore).toBeGreaterThan(0);

  await restart();
  // Resume like a careful coordinator: resolve the uncertain operation with operations.get,
  // then continue from the stream's nextPosition with the same coordinator token.
  for (const w of writers) {
    const last = w.uncertain.at(-1);
    if (last) {
      const op = ok(await admin().call('operations.get', { streamId: w.pair.streamA, operationId: last.operationId }));
      expect(['committed', 'unknown'], `writer ${w.index} ${last.operationId}`).toContain(op.state);
      if (op.state === 'committed') {
        expect(op.firstPosition).toBe(last.expectedPosition);
        w.acked.push({
          operationId: last.operationId,
          firstPosition: op.firstPosition!,
          nextPosition: op.nextPosition!,
          messages: last.messages,
        });
        w.uncertain.pop();
      }
    }
    w.next = ok(await admin().call('streams.get', { streamId: w.pair.streamA })).nextPosition;
  }
  return inFlight;
}

function totalAcked(): number {
  return writers.reduce((n, w) => n + w.acked.length, 0);
}

/** Checks every writer's stream against what was acknowledged (§6 streams.append, operations.get). */
async function verifyWriters(): Promise<void> {
  const keys = await fetchKeys(admin());
  for (const w of writers) {
    const label = `writer ${w.index}`;
    const state = ok(await admin().call('streams.get', { streamId: w.pair.streamA }));
    expect(state.generation, label).toBe('1');
    const lastAcked = w.acked.at(-1)!;
    expect(BigInt(state.nextPosition), label).toBeGreaterThanOrEqual(BigInt(lastAcked.nextPosition));

    // Contiguous positions from firstPosition to nextPosition.
    const records = await readAll(admin(), w.pair.streamA);
    expect(
      records.map((r) => r.position),
      label,
    ).toEqual(
      Array.from({ length: Number(BigInt(state.nextPosition) - BigInt(state.firstPosition)) }, (_, i) =>
        (BigInt(state.firstPosition) + BigInt(i)).toString(),
      ),
    );
    const byPosition = new Map(records.map((r) => [r.position, r]));

    // Every acknowledged append at its acknowledged positions, exactly.
    for (const a of w.acked) {
      expect(BigInt(a.nextPosition) - BigInt(a.firstPosition), `${label} ${a.operationId}`).toBe(BigInt(a.messages.length));
      a.messages.forEach((m, i) => {
        const pos = (BigInt(a.firstPosition) + BigInt(i)).toString();
        const rec = byPosition.get(pos)!;
        expect(rec, `${label} missing ${a.operationId} at ${pos}`).toBeDefined();
        expect(rec.wrapper.type).toBe('chat.message');
        expect(rec.wrapper.operationId).toBe(a.operationId);
        expect(rec.wrapper.recordIndex).toBe(i);
        expect(messageOf(rec).content).toBe(m.content);
        expect(messageOf(rec).clientMessageId).toBe(clientMessageIdFor(w.pair.chatId, w.pair.a.id, m.messageId));
        expect(messageProblems(messageOf(rec), keys, m.messageId), `${label} ${pos}`).toEqual([]);
      });
      const op = ok(await admin().call('operations.get', { streamId: w.pair.streamA, operationId: a.operationId }));
      expect(op, `${label} ${a.operationId}`).toMatchObject({
        state: 'committed',
        generation: '1',
        firstPosition: a.firstPosition,
        nextPosition: a.nextPosition,
      });
    }

    // Every message in the stream verifies and belongs to an operation we sent.
    const sentOps = new Set([...w.acked, ...w.uncertain, ...w.failed].map((x) => x.operationId));
    for (const rec of records) {
      if (rec.wrapper.type !== 'chat.message') continue;
      expect(sentOps.has(rec.wrapper.operationId), `${label} stray op ${rec.wrapper.operationId}`).toBe(true);
      expect(messageProblems(messageOf(rec), keys), `${label} ${rec.position}`).toEqual([]);
    }

    // Operations whose outcome stayed uncertain, or that were answered with an error, never
    // committed and left no records.
    for (const u of [...w.uncertain, ...w.failed]) {
      const op = ok(await admin().call('operations.get', { streamId: w.pair.streamA, operationId: u.operationId }));
      expect(op.state, `${label} ${u.operationId}`).toBe('unknown');
      expect(records.some((r) => r.wrapper.operationId === u.operationId)).toBe(false);
    }

    // The coordinator token still works after the restarts.
    const client = await connectAs(daemon().socketPath, w.pair.a.token);
    const operationId = uniq('after-crash');
    const message = { messageId: uniq('after'), content: 'still here' };
    const after = await client.call('streams.append', {
      streamId: w.pair.streamA,
      coordinatorToken: w.coordinatorToken,
      generation: '1',
      expectedPosition: state.nextPosition,
      operationId,
      records: [{ type: 'chat.message', ...message }],
    });
    expect(after.error, label).toBeUndefined();
    w.acked.push({
      operationId,
      firstPosition: after.result!.firstPosition,
      nextPosition: after.result!.nextPosition,
      messages: [message],
    });
    w.next = after.result!.nextPosition;
    client.close();
  }
}

describe('crash recovery', () => {
  it('keeps every acknowledged append across SIGKILL while appends are in flight', async () => {
    for (let r = 0; r < ROUNDS; r++) {
      const inFlight = await round(
        async () => {
          const exit = await daemon().kill();
          expect(exit.signal).toBe('SIGKILL');
        },
        false,
        12 + r * 5,
      );
      // The kill really happened mid-append: writers had requests outstanding.
      expect(inFlight).toBeGreaterThan(0);
    }
    await verifyWriters();
  }, 90_000);

  it('finishes or fails in-flight appends on SIGTERM, exits 0, and keeps every acknowledged one', async () => {
    await round(
      async () => {
        expect(await daemon().stop(15_000)).toBe(0);
      },
      true,
      8,
    );
    await verifyWriters();
  }, 60_000);

  it('reports storage ok after recovery', async () => {
    const status = ok(await admin().call('daemon.status', {}));
    expect(JSON.stringify(status)).not.toContain('read-only');
  });
});

describe('error responses', () => {
  it('never use code 0 and never carry a stack (errors provoked here, and every one seen in this file)', async () => {
    await expectWellFormedErrors(async () => {
      const missing = 'chat_zzzzzzzzzzzzzzzzzzzzzzzzzz:agt_zzzzzzzzzzzzzzzzzzzzzzzzzz';
      await admin().call('streams.read', { streamId: missing, generation: '1', fromPosition: '0' });
      await admin().call('operations.get', { streamId: missing, operationId: 'not ok' });
    });
  });
});
