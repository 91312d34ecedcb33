// The per-value checks of `yello doctor` (doctor.ts runs the scan): a record against its key,
// its stream's head, its operation and its signature; operations against their log; the
// message-id, username, token, pair and member indexes against the rows they point to.

import { contentSha256 } from '../../crypto/hashing.js';
import { formatDecimal, makeStreamId } from '../../../shared/ids.js';
import type { DoctorProblem, StoredRecord } from '../../../shared/types.js';
import { K } from './key-layout.js';
import type { Signer } from '../../crypto/signer.js';
import type { Storage } from './storage.js';
import type { StreamMeta } from '../stream-meta.js';
import { storedClientMessageId, type CompactRecord, type StoredOperation } from '../record-layout.js';
import type { StreamIdentity, StreamTables } from './stream-tables.js';

export interface StreamScan {
  meta: StreamMeta | undefined;
  generation: number;
  /** Next position expected in the generation being scanned, or null before its first record. */
  expect: number | null;
  firstSeen: number | null;
  /** The operation the last record belongs to, to check the records that follow it. */
  op: { id: string; next: number; index: number } | null;
  lastCreatedAt: string | null;
  /** First problem position per generation (for the mark). */
  damage: Map<number, number>;
}

export type Report = (
  kind: string,
  key: string | null,
  detail: string,
  where?: Partial<Pick<DoctorProblem, 'streamId' | 'generation' | 'position'>>,
) => void;

export function sealedBounds(meta: StreamMeta, generation: number): { first: number; next: number } | null {
  const s = meta.sealed.find((g) => g.generation === generation);
  return s ? { first: s.firstPosition, next: s.nextPosition } : null;
}

/** The retained bounds of a generation the head knows (current or sealed), or null. */
export function generationBounds(meta: StreamMeta, generation: number): { first: number; next: number } | null {
  return generation === meta.generation ? { first: meta.firstPosition, next: meta.nextPosition } : sealedBounds(meta, generation);
}

/** A point read (`read`) that reports a value failing its checksum instead of throwing. */
function tryRead<T>(read: () => T): T | 'corrupt' {
  try {
    return read();
  } catch {
    return 'corrupt';
  }
}

/** One record: where its key says, contiguous, covered by its operation, signed. True when damaged. */
export function checkRecord(
  tables: StreamTables,
  signer: Signer,
  key: string,
  record: StoredRecord,
  streamId: string,
  generation: number,
  position: number,
  scan: StreamScan,
  problem: Report,
  counts: { messages: number },
): boolean {
  const where = { streamId, generation: formatDecimal(generation), position: formatDecimal(position) };
  let damaged = false;
  const bad = (detail: string) => {
    problem('record', key, detail, where);
    damaged = true;
  };
  if (record.streamId !== streamId || record.generation !== formatDecimal(generation) || record.position !== formatDecimal(position)) {
    bad(`the record names ${record.streamId} generation ${record.generation} position ${record.position}`);
  }
  const meta = scan.meta;
  const bounds = meta ? generationBounds(meta, generation) : null;
  // The first record of a generation lies at its retained start; one that lies above it leaves
  // records of the retained range missing (readers would stop at the start).
  if (scan.expect === null && bounds && position > bounds.first) {
    problem('record', null, `positions ${bounds.first}..${position - 1} are missing`, { ...where, position: formatDecimal(bounds.first) });
    scan.damage.set(generation, Math.min(scan.damage.get(generation) ?? Infinity, bounds.first));
  }
  // A trim may have cut the first retained record's operation in two: its earlier records are
  // gone with the prefix, so the operation is continued from here rather than started.
  const continuesTrimmed = scan.expect === null && bounds !== null && position === bounds.first;
  if (scan.expect !== null && position !== scan.expect) {
    // Named at the first missing position: that is where readers will stop.
    problem('record', null, `positions ${scan.expect}..${position - 1} are missing`, { ...where, position: formatDecimal(scan.expect) });
    scan.damage.set(generation, Math.min(scan.damage.get(generation) ?? Infinity, scan.expect));
  }
  scan.expect = position + 1;
  if (meta) {
    if (generation === meta.generation && position >= meta.nextPosition) bad(`a record at or past the head (${meta.nextPosition})`);
    const sealed = sealedBounds(meta, generation);
    if (sealed && position >= sealed.next) bad(`a record past the sealed generation's end (${sealed.next})`);
  }
  const w = record.wrapper;
  if (w.chatId !== streamId.slice(0, streamId.indexOf(':')) || w.authorAgentId !== streamId.slice(streamId.indexOf(':') + 1))
    bad('the wrapper names another chat or author');
  if (w.type === 'chat.message') {
    counts.messages++;
    const m = w.message;
    if (contentSha256(m.content) !== m.contentSha256) bad('contentSha256 does not match the content');
    else if (
      !signer.verifyMessage(
        {
          chatId: m.chatId,
          fromAgentId: m.fromAgentId,
          toAgentId: m.toAgentId,
          createdAt: m.signature.createdAt,
          contentSha256: m.contentSha256,
        },
        m.signature,
      )
    ) {
      bad(`the signature does not verify (kid ${m.signature.kid})`);
    }
    if (scan.lastCreatedAt !== null && m.signature.createdAt < scan.lastCreatedAt) bad('createdAt goes backwards');
    scan.lastCreatedAt = m.signature.createdAt;
  }
  if (w.type !== 'chat.writer-fence') {
    if (w.recordIndex === 0) {
      let op: StoredOperation | undefined | 'corrupt';
      try {
        op = tables.operation(streamId, w.operationId);
      } catch {
        op = 'corrupt';
      }
      if (op === 'corrupt' || op === undefined || op.generation !== generation || op.firstPosition !== position) {
        bad(`operation ${w.operationId} is missing or does not start here`);
        scan.op = null;
      } else {
        scan.op = { id: w.operationId, next: op.nextPosition, index: 0 };
      }
    } else if (continuesTrimmed) {
      const op = tryRead(() => tables.operation(streamId, w.operationId));
      if (op === 'corrupt' || op === undefined || op.generation !== generation || op.firstPosition + w.recordIndex !== position) {
        bad(`operation ${w.operationId} is missing or does not cover record ${w.recordIndex} here`);
        scan.op = null;
      } else {
        scan.op = { id: w.operationId, next: op.nextPosition, index: w.recordIndex };
      }
    } else if (!scan.op || scan.op.id !== w.operationId || w.recordIndex !== scan.op.index + 1) {
      bad(`record ${w.recordIndex} of operation ${w.operationId} does not follow its operation's records`);
    } else {
      scan.op.index = w.recordIndex;
    }
    if (scan.op && position >= scan.op.next) bad(`the record lies past its operation's end (${scan.op.next})`);
  } else {
    scan.op = null;
  }
  return damaged;
}

export function checkOperation(storage: Storage, key: string, op: StoredOperation, problem: Report): void {
  const streamId = key.slice(2, key.lastIndexOf('/'));
  const logged = tryRead(() => storage.get<string>(K.opLog(streamId, op.generation, op.firstPosition)));
  if (logged !== op.operationId)
    problem('operation', key, `the operation log has no entry for ${op.operationId} at ${op.firstPosition}`, {
      streamId,
      generation: formatDecimal(op.generation),
      position: formatDecimal(op.firstPosition),
    });
}

export function checkMessageIndex(storage: Storage, key: string, position: string, problem: Report): void {
  const [, streamId, generationText, clientMessageId] = key.split('/');
  // Never undefined for a key of the message-id table (`x/<stream>/...`); reported rather than assumed.
  if (streamId === undefined) {
    problem('index', key, 'a message-id index key that names no stream');
    return;
  }
  const generation = Number(generationText);
  const record = tryRead(() => storage.get<CompactRecord | StoredRecord>(K.record(streamId, generation, Number(position))));
  // A trimmed record takes its message id's record with it; only a record that is there must match.
  if (record === 'corrupt' || (record !== undefined && storedClientMessageId(record) !== clientMessageId)) {
    problem('index', key, `the message-id index points at position ${position}, which holds another record`, {
      streamId,
      generation: formatDecimal(generation),
      position,
    });
  }
}

export function checkAgent(
  storage: Storage,
  key: string,
  agent: { id: string; username: string; tokenHash: string },
  problem: Report,
): void {
  if (tryRead(() => storage.get<string>(K.username(agent.username))) !== agent.id)
    problem('directory', key, `the username index does not lead to agent ${agent.id}`);
  if (tryRead(() => storage.get<string>(K.token(agent.tokenHash))) !== agent.id)
    problem('directory', key, `the token index does not lead to agent ${agent.id}: its token cannot authenticate (rotate it)`);
}

export function checkChat(storage: Storage, key: string, chat: { id: string; agentAId: string; agentBId: string }, problem: Report): void {
  if (tryRead(() => storage.get<string>(K.pair(chat.agentAId, chat.agentBId))) !== chat.id)
    problem('directory', key, `the pair index does not lead to chat ${chat.id}`);
  for (const agentId of [chat.agentAId, chat.agentBId]) {
    if (tryRead(() => storage.get(K.member(agentId, chat.id))) === undefined)
      problem('directory', key, `chat ${chat.id} is missing from ${agentId}'s chat list`);
    if (tryRead(() => storage.get(K.stream(makeStreamId(chat.id, agentId)))) === undefined)
      problem('head', K.stream(makeStreamId(chat.id, agentId)), 'the stream head is missing, though its chat exists', {
        streamId: makeStreamId(chat.id, agentId),
      });
  }
}

/** Chat, author and peer of a stream whose head is unreadable, from its chat row. */
export function identityFromChat(storage: Storage, streamId: string): StreamIdentity {
  const i = streamId.indexOf(':');
  const chatId = streamId.slice(0, i);
  const authorAgentId = streamId.slice(i + 1);
  const chat = tryRead(() => storage.get<{ agentAId: string; agentBId: string }>(K.chat(chatId)));
  const peerAgentId = chat && chat !== 'corrupt' ? (chat.agentAId === authorAgentId ? chat.agentBId : chat.agentAId) : '';
  return { streamId, chatId, authorAgentId, peerAgentId };
}
