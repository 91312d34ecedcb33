import { errors } from '../../shared/errors.js';
import { splitStreamId } from '../../shared/ids.js';
import type { Caller } from '../caller.js';
import type { StreamMeta } from '../store/stream-meta.js';

/** Participants and admin read a stream; anyone else is NOT_PARTICIPANT. */
export function assertReader(caller: Caller, meta: StreamMeta): void {
  if (caller.role === 'agent' && caller.agentId !== meta.authorAgentId && caller.agentId !== meta.peerAgentId) {
    throw errors.permissionDenied('NOT_PARTICIPANT', `agent ${caller.agentId} is not a participant of ${meta.chatId}`);
  }
}

/** Only the author claims or appends to a stream, checked before the stream lookup (§6 order: author, then stream). */
export function assertAuthor(caller: Caller, streamId: string): void {
  const parts = splitStreamId(streamId);
  if (caller.role !== 'agent' || !parts || parts.authorAgentId !== caller.agentId) {
    throw errors.permissionDenied('NOT_AUTHOR', 'only the author of a stream may claim it or append to it');
  }
}
