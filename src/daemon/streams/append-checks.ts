import { errors } from '../../shared/errors.js';
import { formatDecimal, parseDecimal } from '../../shared/ids.js';
import { clientMessageId, sha256Base64url } from '../crypto/hashing.js';
import type { PiiMode, Redaction } from '../../shared/types.js';
import type { Caller } from '../caller.js';
import { openBatchId } from '../crypto/batch-codec.js';
import type { TokenCodec } from '../crypto/token-codec.js';
import { applyPiiPolicy } from '../pii/pii-policy.js';
import type { AppendRequest } from '../requests.js';
import type { StreamPort } from '../store/port/stream-port.js';
import { peerStreamIdOf, type StreamMeta } from '../store/stream-meta.js';
import type { StreamHeads } from './heads.js';

// The checks of an append's records, each synchronous: they run inside the admission step.

type Records = AppendRequest['records'];

/**
 * Receipts: a batch this agent was shown, of the peer's current generation, moving forward.
 * Updates `next.receipt`.
 */
export function checkReceipts(heads: StreamHeads, codec: TokenCodec, caller: Caller, next: StreamMeta, records: Records): void {
  const peerStreamId = peerStreamIdOf(next);
  for (const r of records) {
    if (r.type !== 'chat.receipt') continue;
    if (r.peerStreamId !== peerStreamId) throw errors.invalidReceipt('WRONG_STREAM');
    const batch = openBatchId(codec, r.batchId);
    if (!batch) throw errors.invalidReceipt('UNKNOWN_BATCH');
    const reader = caller.role === 'agent' ? caller.agentId : 'admin';
    if (batch.reader !== reader || batch.streamId !== r.peerStreamId) throw errors.invalidReceipt('NOT_PRESENTED');
    const peerGeneration = parseDecimal(r.peerGeneration);
    const nextPosition = parseDecimal(r.nextPosition);
    if (batch.generation !== peerGeneration || batch.nextPosition !== nextPosition) throw errors.invalidReceipt('BATCH_MISMATCH');
    const peer = heads.admitted(peerStreamId);
    if (!peer || peer.generation !== peerGeneration) throw errors.invalidReceipt('STALE_GENERATION');
    const last = next.receipt;
    if (last && last.peerGeneration === peerGeneration && nextPosition <= last.nextPosition) throw errors.invalidReceipt('NOT_FORWARD');
    if (last && last.peerGeneration > peerGeneration) throw errors.invalidReceipt('STALE_GENERATION');
    next.receipt = { peerGeneration, nextPosition };
  }
}

/**
 * The clientMessageIds of the messages (by record index, `messageIdsOf`); DUPLICATE_MESSAGE on
 * reuse in this generation.
 */
export function checkMessageIds(streams: StreamPort, meta: StreamMeta, ids: ReadonlyArray<string | undefined>): Array<string | undefined> {
  const seen = new Map<string, number>();
  return ids.map((id, index) => {
    if (id === undefined) return undefined;
    const stored = streams.messagePosition(meta.streamId, meta.generation, id);
    if (stored !== undefined) throw errors.duplicateMessage(formatDecimal(stored));
    const inRequest = seen.get(id);
    if (inRequest !== undefined) throw errors.duplicateMessage(formatDecimal(meta.nextPosition + inRequest));
    seen.set(id, index);
    return id;
  });
}

/**
 * The sender's PII policy over the messages: their contents as stored (by record index), with
 * what was redacted added to `redactions`; POLICY_REJECTED in `reject` mode when anything is found.
 */
export function applyPolicy(mode: PiiMode, records: Records, redactions: Redaction[]): Array<string | undefined> {
  const kinds = new Set<string>();
  const contents = records.map((r, recordIndex) => {
    if (r.type !== 'chat.message') return undefined;
    const outcome = applyPiiPolicy(r.content, mode);
    for (const f of outcome.found) {
      kinds.add(f.kind);
      if (mode === 'redact') redactions.push({ recordIndex, kind: f.kind, count: f.count });
    }
    return outcome.content;
  });
  if (mode === 'reject' && kinds.size > 0) throw errors.policyRejected([...kinds].sort());
  return contents;
}

/** The clientMessageId of each message of an append, by record index (receipts: undefined). */
export function messageIdsOf(meta: Pick<StreamMeta, 'chatId' | 'authorAgentId'>, records: Records): Array<string | undefined> {
  return records.map((r) => (r.type === 'chat.message' ? clientMessageId(meta.chatId, meta.authorAgentId, r.messageId) : undefined));
}

/** Digest of what an append asks to write (not the token): equal requests replay, others conflict. */
export function requestDigest(p: AppendRequest): string {
  const records = p.records.map((r) =>
    r.type === 'chat.message' ? ['m', r.messageId, r.content] : ['r', r.peerStreamId, r.peerGeneration, r.nextPosition, r.batchId],
  );
  // Positions as the decimal strings of the wire, so digests stored before stay comparable.
  const canonical = JSON.stringify([p.streamId, formatDecimal(p.generation), formatDecimal(p.expectedPosition), records]);
  return sha256Base64url(canonical);
}
