import type { Chat, StoredRecord } from '../client/index.js';
import { displayText } from './output.js';

/** One human line for a record: content and names shown as data, never as terminal control or extra lines. */
export function formatRecord(r: StoredRecord, chat: Chat): string {
  return displayText(recordLine(r, chat));
}

function recordLine(r: StoredRecord, chat: Chat): string {
  const name = (id: string) => (id === chat.agentA.id ? chat.agentA.username : id === chat.agentB.id ? chat.agentB.username : id);
  const w = r.wrapper;
  const at = `#${r.position}`;
  if (w.type === 'chat.message')
    return `${w.message.signature.createdAt}  ${name(w.message.fromAgentId)} → ${name(w.message.toAgentId)}  ${at}  ${w.message.content}`;
  if (w.type === 'chat.receipt')
    return `${''.padEnd(24)}  ${name(w.authorAgentId)} acknowledged ${name(w.receipt.peerStreamId.split(':')[1] ?? '')}'s messages before #${w.receipt.nextPosition}  ${at}`;
  return `${w.fence.claimedAt}  ${name(w.authorAgentId)} claimed the stream (epoch ${w.fence.epoch}${w.fence.replaced ? ', replacing' : ''})  ${at}`;
}
