import type { Chat, MessageBatch, StoredRecord } from '../client/index.js';
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

/** Usernames of a chat's two agents, for text meant for the model. */
export function namer(chat: Chat): (agentId: string) => string {
  return (id) => (id === chat.agentA.id ? chat.agentA.username : id === chat.agentB.id ? chat.agentB.username : id);
}

/** One line per presented record. */
export function batchLines(batch: MessageBatch, chat: Chat): string[] {
  const name = namer(chat);
  return batch.records.map((r) => {
    const w = r.wrapper;
    if (w.type === 'chat.message')
      return `#${r.position} ${w.message.signature.createdAt} ${name(w.message.fromAgentId)}: ${w.message.content}`;
    if (w.type === 'chat.receipt')
      return `#${r.position} (${name(w.authorAgentId)} acknowledged your messages before #${w.receipt.nextPosition})`;
    return `#${r.position} (${name(w.authorAgentId)} started writing from a new session, epoch ${w.fence.epoch})`;
  });
}

/** One line per transcript message. */
export function transcriptLines(messages: TranscriptMessage[], chat: Chat): string[] {
  const name = namer(chat);
  return messages.map((m) => `${m.createdAt} ${name(m.fromAgentId)} → ${name(m.toAgentId)}: ${m.content}`);
}
