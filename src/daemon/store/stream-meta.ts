import { formatDecimal, makeStreamId } from '../../shared/ids.js';
import type { StreamState } from '../../shared/types.js';

/** A sealed earlier generation: still readable, never written again. */
export interface SealedGeneration {
  generation: number;
  firstPosition: number;
  nextPosition: number;
  sealedAt: string;
  reason: string;
}

/**
 * Persistent head and writer state of one stream, stored beside its records and updated in
 * the same atomic batch, so startup never scans records to find a head.
 */
export interface StreamMeta {
  streamId: string;
  chatId: string;
  authorAgentId: string;
  peerAgentId: string;
  createdAt: string;
  generation: number;
  firstPosition: number;
  nextPosition: number;
  /** Last signature time; timestamps never go backwards within a stream. */
  lastCreatedAt: string | null;
  writer: { epoch: number; claimedAt: string | null; active: boolean; tokenHash: string | null };
  /** The latest receipt this stream's author gave for the peer's stream. */
  receipt: { peerGeneration: number; nextPosition: number } | null;
  sealed: SealedGeneration[];
}

export function newStreamMeta(chatId: string, authorAgentId: string, peerAgentId: string, createdAt: string): StreamMeta {
  return {
    streamId: makeStreamId(chatId, authorAgentId),
    chatId,
    authorAgentId,
    peerAgentId,
    createdAt,
    generation: 1,
    firstPosition: 0,
    nextPosition: 0,
    lastCreatedAt: null,
    writer: { epoch: 0, claimedAt: null, active: false, tokenHash: null },
    receipt: null,
    sealed: [],
  };
}

/** The stream the peer writes in the same chat. */
export function peerStreamIdOf(meta: Pick<StreamMeta, 'chatId' | 'peerAgentId'>): string {
  return makeStreamId(meta.chatId, meta.peerAgentId);
}

/** A copy safe to mutate (on the append path, so no structuredClone). */
export function cloneMeta(meta: StreamMeta): StreamMeta {
  return {
    ...meta,
    writer: { ...meta.writer },
    receipt: meta.receipt ? { ...meta.receipt } : null,
    sealed: meta.sealed.map((g) => ({ ...g })),
  };
}

/**
 * The public StreamState; `acknowledged` comes from the peer stream's receipt, `connected`
 * from the writer's presence (streams/writer-presence.ts), which the store does not keep.
 */
export function publicStreamState(meta: StreamMeta, peer: StreamMeta | undefined, connected: boolean): StreamState {
  const r = peer?.receipt;
  return {
    streamId: meta.streamId,
    chatId: meta.chatId,
    authorAgentId: meta.authorAgentId,
    generation: formatDecimal(meta.generation),
    firstPosition: formatDecimal(meta.firstPosition),
    nextPosition: formatDecimal(meta.nextPosition),
    acknowledged: r ? { generation: formatDecimal(r.peerGeneration), nextPosition: formatDecimal(r.nextPosition) } : null,
    writer: {
      epoch: formatDecimal(meta.writer.epoch),
      claimedAt: meta.writer.claimedAt,
      active: meta.writer.active,
      connected: meta.writer.active && connected,
    },
  };
}
