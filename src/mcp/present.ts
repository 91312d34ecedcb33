import type { Chat, StoredRecord } from '../client/index.js';
import { fencePeerData, namer, quotePeerText } from '../client/peer-data.js';
import type { PresentedRecord, TranscriptMessage } from './tool-schemas.js';

/** A stored record reduced to what an agent reads (signatures stay in the store, the export and history). */
export function presentRecord(r: StoredRecord): PresentedRecord {
  const w = r.wrapper;
  const base = { position: r.position, authorAgentId: w.authorAgentId };
  if (w.type === 'chat.message')
    return { ...base, type: 'message', createdAt: w.message.signature.createdAt, content: w.message.content, acknowledgedBefore: null };
  if (w.type === 'chat.receipt')
    return { ...base, type: 'receipt', createdAt: null, content: null, acknowledgedBefore: w.receipt.nextPosition };
  return { ...base, type: 'fence', createdAt: w.fence.claimedAt, content: null, acknowledgedBefore: null };
}

/** A transcript entry (a `chat.message` record) as history and the transcript resource give it. */
export function transcriptMessage(r: StoredRecord): TranscriptMessage | null {
  if (r.wrapper.type !== 'chat.message') return null;
  const m = r.wrapper.message;
  return {
    streamId: r.streamId,
    generation: r.generation,
    position: r.position,
    fromAgentId: m.fromAgentId,
    toAgentId: m.toAgentId,
    createdAt: m.signature.createdAt,
    content: m.content,
  };
}

/** Transcript messages as fenced lines, one per message, the text quoted (see {@link fencePeerData}). */
export function transcriptLines(messages: TranscriptMessage[], chat: Chat): string[] {
  const name = namer(chat);
  const lines = messages.map((m) => `${m.createdAt} ${name(m.fromAgentId)} → ${name(m.toAgentId)}: ${quotePeerText(m.content)}`);
  return fencePeerData(lines, `the agents of this chat (${chat.agentA.username} and ${chat.agentB.username})`);
}
