/**
 * LevelDB key layout. Every key is a UTF-8 string whose first segment names the table;
 * ids never contain `/`, and numbers are zero-padded so lexicographic order is numeric
 * order, which lets range iterators read a page in O(page).
 */
import { DirectoryKeys } from '../directory-keys.js';
import { StreamKeys } from '../stream-keys.js';

const pad = (n: number) => n.toString().padStart(16, '0');

/** One past the last key that starts with `prefix` (`/` + 1 is `0`). */
export function prefixEnd(prefix: string): string {
  return prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
}

export const K = {
  meta: (name: string) => `meta/${name}`,
  // The keys of values: one definition for both engines (directory-keys.ts, stream-keys.ts).
  agent: DirectoryKeys.agent,
  agentsPrefix: DirectoryKeys.agent(''),
  username: DirectoryKeys.username,
  token: DirectoryKeys.token,
  grant: DirectoryKeys.grant,
  grantsPrefix: (agentId?: string) => (agentId === undefined ? 'g/' : DirectoryKeys.grant(agentId, '')),
  chat: DirectoryKeys.chat,
  chatsPrefix: DirectoryKeys.chat(''),
  pair: DirectoryKeys.pair,
  member: DirectoryKeys.member,
  membersPrefix: (agentId: string) => DirectoryKeys.member(agentId, ''),
  stream: StreamKeys.stream,
  /** The part of a head every append changes (record-layout.ts `StreamTail`). */
  tail: (streamId: string) => `h/${streamId}`,
  record: StreamKeys.record,
  recordsPrefix: (streamId: string, generation: number) => `r/${streamId}/${pad(generation)}/`,
  operation: StreamKeys.operation,
  operationsPrefix: (streamId: string) => `o/${streamId}/`,
  opLog: StreamKeys.opLog,
  opLogPrefix: (streamId: string) => `ol/${streamId}/`,
  messageId: StreamKeys.messageId,
  messageIdsPrefix: (streamId: string, generation: number) => `x/${streamId}/${pad(generation)}/`,
  /** A corruption mark of a stream generation (generation 0: the whole stream, generation unknown). */
  corruptMark: StreamKeys.corruptMark,
  corruptMarksPrefix: 'k/',
  streamsPrefix: 's/',
  recordsOfStream: (streamId: string) => `r/${streamId}/`,
};

/** The stream, generation and position a key belongs to, as far as its table says (for error details). */
export function locateKey(key: string): { streamId: string | null; generation: string | null; position: string | null } {
  const parts = key.split('/');
  const table = parts[0];
  const streamId = ['s', 'h', 'r', 'o', 'ol', 'x', 'k'].includes(table ?? '') ? (parts[1] ?? null) : null;
  const num = (v: string | undefined) => (v !== undefined && /^\d{16}$/.test(v) ? String(Number(v)) : null);
  const generation = table === 'r' || table === 'ol' || table === 'x' || table === 'k' ? num(parts[2]) : null;
  const position = table === 'r' || table === 'ol' ? num(parts[3]) : null;
  return { streamId, generation, position };
}
