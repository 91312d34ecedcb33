import { errors } from '../../shared/errors.js';
import { formatDecimal, makeStreamId } from '../../shared/ids.js';
import type { Caller } from '../caller.js';
import type { FollowRequest } from '../requests.js';
import type { StreamMeta } from '../store/stream-meta.js';
import type { ChatReader } from './chat-reader.js';
import type { StreamStore } from './stream-store.js';

/** Where a subscription stands in one stream: the next position it delivers. */
export interface Cursor {
  generation: number;
  position: number;
}

/**
 * The starting cursor of each stream of a new `chats.follow`: the given cursor (checked for
 * continuity), the resume policy of `from: "acknowledged"` (docs/protocol.md §6.5), position 0
 * of the peer's current generation (`"generation-start"`), or the current ends. A start that
 * would pass over records that are gone, or over unread messages of a sealed generation, is a
 * continuity break.
 */
export async function startCursors(
  streams: StreamStore,
  reader: ChatReader,
  caller: Caller,
  chatId: string,
  streamIds: [string, string],
  p: FollowRequest,
): Promise<Map<string, Cursor>> {
  if (p.from !== undefined && p.cursor !== undefined) throw errors.invalidParams('from', 'give either a cursor or from, not both');
  if ((p.from === 'acknowledged' || p.from === 'generation-start') && caller.role !== 'agent') {
    throw errors.invalidParams('from', `"${p.from}" starts the caller's peer stream from its own receipts; only an agent has them`);
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
    if (caller.role === 'agent' && meta.authorAgentId !== caller.agentId) {
      if (p.from === 'acknowledged') position = await acknowledgedStart(streams, chatId, caller.agentId, meta);
      if (p.from === 'generation-start') position = 0;
      // Unacknowledged records that were trimmed away are a break, never a skip.
      if (p.from === 'acknowledged' || p.from === 'generation-start') streams.checkContinuity(id, meta.generation, position);
    }
    cursors.set(id, { generation: meta.generation, position });
  }
  return cursors;
}

/**
 * The one resume policy: the peer stream continues after the agent's own latest receipt. A
 * receipt of the current generation gives its `nextPosition`. Otherwise (a receipt of a sealed
 * generation, or none while the stream has been reset) the new generation starts at 0 only if
 * nothing unread lies behind it: a message the agent has not acknowledged in a sealed
 * generation is CONTINUITY_BREAK/GENERATION_CHANGED (`expected`: the oldest such generation),
 * never silently passed over.
 */
async function acknowledgedStart(streams: StreamStore, chatId: string, agentId: string, peer: StreamMeta): Promise<number> {
  const receipt = streams.continuingMeta(makeStreamId(chatId, agentId)).receipt;
  if (receipt && receipt.peerGeneration === peer.generation) return receipt.nextPosition;
  const first = receipt ? receipt.peerGeneration : 1;
  for (let g = first; g < peer.generation; g++) {
    const from = receipt && g === receipt.peerGeneration ? receipt.nextPosition : 0;
    if (await unreadMessage(streams, peer, g, from)) {
      throw errors.continuityBreak('GENERATION_CHANGED', peer.streamId, formatDecimal(g), formatDecimal(peer.generation));
    }
  }
  return 0;
}

/**
 * Whether sealed generation `g` of `peer` may hold a message at or after `from`. Receipts and
 * fences are not unread messages. What cannot be read — trimmed away, or past a corruption mark
 * — counts as unread: the daemon cannot say it held no message.
 */
async function unreadMessage(streams: StreamStore, peer: StreamMeta, g: number, from: number): Promise<boolean> {
  const b = streams.bounds(peer, g);
  if (!b || from >= b.nextPosition) return false;
  if (from < b.firstPosition) return true;
  const end = Math.min(b.nextPosition, streams.readLimit(peer.streamId, g));
  for await (const { record } of streams.scan(peer.streamId, g, from, end)) {
    if (record.wrapper.type === 'chat.message') return true;
  }
  return end < b.nextPosition;
}
