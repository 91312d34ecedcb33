import { ContinuityBreakError, type Chat, type StoredRecord, type YelloClient } from '../client/index.js';
import { formatRecord } from './format.js';
import { displayText } from './output.js';

/** One generation of one stream as `chats history --all-generations` read it. */
export interface GenerationSpan {
  streamId: string;
  authorAgentId: string;
  generation: string;
  sealed: boolean;
  /** Where the retained records start: above `"0"` the generation's start was trimmed. */
  firstPosition: string;
  /** The end read: a sealed generation's end, or the current one's head when the read began. */
  nextPosition: string;
}

/** A chat's whole conversation: every retained message of every generation of both streams. */
export interface WholeChat {
  entries: StoredRecord[];
  generations: GenerationSpan[];
}

/**
 * Every retained message of the chat, over every generation of both streams (sealed ones
 * included, which `chats.history` cannot reach), ordered as `chats.history` orders its entries
 * (`signature.createdAt`, then `fromAgentId`), then by generation and position. The current
 * generations are read up to their heads as `chats.get` gave them, so the result is one
 * snapshot; what was trimmed is reported by each span's `firstPosition`, never skipped silently.
 */
export async function readWholeChat(c: YelloClient, chatId: string): Promise<WholeChat> {
  const { streams } = await c.call('chats.get', { chatId });
  const entries: StoredRecord[] = [];
  const generations: GenerationSpan[] = [];
  for (const s of streams) {
    const current = BigInt(s.generation);
    for (let g = 1n; g <= current; g++) {
      const generation = g.toString();
      const sealed = g < current;
      const start = sealed ? await retainedStart(c, s.streamId, generation) : s.firstPosition;
      if (start === null) continue;
      let from = start;
      for (;;) {
        if (!sealed && BigInt(from) >= BigInt(s.nextPosition)) break;
        const batch = await c.call('streams.read', { streamId: s.streamId, generation, fromPosition: from });
        for (const r of batch.records) {
          if (!sealed && BigInt(r.position) >= BigInt(s.nextPosition)) break;
          if (r.wrapper.type === 'chat.message') entries.push(r);
        }
        if (batch.records.length === 0) break;
        from = batch.nextPosition;
      }
      const nextPosition = sealed ? from : s.nextPosition;
      generations.push({ streamId: s.streamId, authorAgentId: s.authorAgentId, generation, sealed, firstPosition: start, nextPosition });
    }
  }
  entries.sort(transcriptOrder);
  return { entries, generations };
}

/**
 * Where a sealed generation's retained records start: `"0"`, or the first position a trim left.
 * Null for a generation number no reset used (a reset moves past corrupt-marked generations).
 */
async function retainedStart(c: YelloClient, streamId: string, generation: string): Promise<string | null> {
  try {
    await c.call('streams.read', { streamId, generation, fromPosition: '0', limit: 1 });
    return '0';
  } catch (err) {
    if (!(err instanceof ContinuityBreakError)) throw err;
    if (err.reason === 'PREFIX_UNAVAILABLE' && typeof err.data.actual === 'string') return err.data.actual;
    if (err.reason === 'GENERATION_CHANGED') return null;
    throw err;
  }
}

const big = (a: string, b: string): number => {
  const d = BigInt(a) - BigInt(b);
  return d < 0n ? -1 : d > 0n ? 1 : 0;
};

/** chats.history's order (docs/protocol.md §6.5), then generation and position. */
function transcriptOrder(x: StoredRecord, y: StoredRecord): number {
  if (x.wrapper.type !== 'chat.message' || y.wrapper.type !== 'chat.message') return 0;
  const a = x.wrapper.message;
  const b = y.wrapper.message;
  if (a.signature.createdAt !== b.signature.createdAt) return a.signature.createdAt < b.signature.createdAt ? -1 : 1;
  if (a.fromAgentId !== b.fromAgentId) return a.fromAgentId < b.fromAgentId ? -1 : 1;
  return big(x.generation, y.generation) || big(x.position, y.position);
}

/**
 * The human transcript: each message as `chats history` prints it, and before the first
 * message of each generation of a stream that has been reset a mark saying which generation
 * follows (and where a trim left it); then one line listing the generations of both streams.
 */
export function printWholeChat(whole: WholeChat, chat: Chat, write: (line: string) => void): void {
  const name = (id: string) => (id === chat.agentA.id ? chat.agentA.username : id === chat.agentB.id ? chat.agentB.username : id);
  const direction = (author: string) => `${name(author)} → ${name(author === chat.agentA.id ? chat.agentB.id : chat.agentA.id)}`;
  const reset = new Set(whole.generations.filter((g) => g.generation !== '1').map((g) => g.streamId));
  const span = (r: StoredRecord) => whole.generations.find((g) => g.streamId === r.streamId && g.generation === r.generation);
  const marked = new Set<string>();
  for (const r of whole.entries) {
    const key = `${r.streamId} ${r.generation}`;
    const g = span(r);
    if (g && reset.has(r.streamId) && !marked.has(key)) {
      marked.add(key);
      write(displayText(`-- ${direction(g.authorAgentId)}: generation ${g.generation}${spanNote(g)} --`));
    }
    write(formatRecord(r, chat));
  }
  const streams = [...new Set(whole.generations.map((g) => g.streamId))].map((id) => whole.generations.filter((g) => g.streamId === id));
  const listed = streams.map(
    (gens) => `${direction(gens[0]?.authorAgentId ?? '')} ${gens.map((g) => g.generation + spanNote(g)).join(', ')}`,
  );
  write(displayText(`generations: ${listed.join('; ')}`));
}

function spanNote(g: GenerationSpan): string {
  const notes = [g.sealed ? 'sealed by a reset' : 'current'];
  if (g.firstPosition !== '0') notes.push(`trimmed below #${g.firstPosition}`);
  return ` (${notes.join(', ')})`;
}
