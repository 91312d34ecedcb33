import { errors } from '../../shared/errors.js';
import { makeStreamId } from '../../shared/ids.js';
import type { Caller } from '../caller.js';
import type { FollowRequest } from '../requests.js';
import type { ChatReader } from './chat-reader.js';
import type { StreamStore } from './stream-store.js';

/** Where a subscription stands in one stream: the next position it delivers. */
export interface Cursor {
  generation: number;
  position: number;
}

/**
 * The starting cursor of each stream of a new `chats.follow`: the given cursor (checked for
 * continuity), the agent's own last receipt in the peer stream (`from: "acknowledged"`), or the
 * current ends. A start that would pass over records that are gone is a continuity break.
 */
export function startCursors(
  streams: StreamStore,
  reader: ChatReader,
  caller: Caller,
  chatId: string,
  streamIds: [string, string],
  p: FollowRequest,
): Map<string, Cursor> {
  if (p.from !== undefined && p.cursor !== undefined) throw errors.invalidParams('from', 'give either a cursor or from, not both');
  if (p.from === 'acknowledged' && caller.role !== 'agent') {
    throw errors.invalidParams('from', '"acknowledged" starts from the caller\'s own receipts; only an agent has them');
  }
  const cursors = new Map<string, Cursor>();
  if (p.cursor !== undefined) {
    const c = reader.openLiveCursor(chatId, p.cursor, streamIds);
    for (const id of streamIds) {
      const at = c.streams[id];
      // openLiveCursor already refuses a cursor without both streams.
      if (!at) throw errors.invalidParams('cursor', 'the cursor does not cover this chat');
      streams.checkContinuity(id, at.generation, at.position);
      cursors.set(id, { generation: at.generation, position: at.position });
    }
    return cursors;
  }
  for (const id of streamIds) {
    const meta = streams.continuingMeta(id);
    let position = meta.nextPosition;
    if (p.from === 'acknowledged' && caller.role === 'agent' && meta.authorAgentId !== caller.agentId) {
      position = acknowledgedStart(streams, chatId, caller.agentId, meta.generation);
    }
    // Unacknowledged records that were trimmed away are a break, never a skip; a corruption
    // mark at the start (also at the head: what came after it is unknown) is CORRUPT.
    streams.checkContinuity(id, meta.generation, position);
    cursors.set(id, { generation: meta.generation, position });
  }
  return cursors;
}

/**
 * Where the agent's own latest receipt leaves off in the peer stream's generation
 * `peerGeneration`: its `nextPosition`, or 0 when the agent acknowledged nothing of that
 * generation (a receipt of a sealed generation does not carry over a reset).
 */
function acknowledgedStart(streams: StreamStore, chatId: string, agentId: string, peerGeneration: number): number {
  const receipt = streams.continuingMeta(makeStreamId(chatId, agentId)).receipt;
  return receipt && receipt.peerGeneration === peerGeneration ? receipt.nextPosition : 0;
}
