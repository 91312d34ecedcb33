/**
 * LevelDB key layout. Every key is a UTF-8 string whose first segment names the table;
 * ids never contain `/`, and numbers are zero-padded so lexicographic order is numeric
 * order, which lets range iterators read a page in O(page).
 */
const pad = (n: number) => n.toString().padStart(16, '0');

/** One past the last key that starts with `prefix` (`/` + 1 is `0`). */
export function prefixEnd(prefix: string): string {
  return prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
}

export const K = {
  meta: (name: string) => `meta/${name}`,
  agent: (agentId: string) => `a/${agentId}`,
  agentsPrefix: 'a/',
  username: (username: string) => `u/${username}`,
  token: (tokenHash: string) => `t/${tokenHash}`,
  grant: (agentId: string, peerAgentId: string) => `g/${agentId}/${peerAgentId}`,
  grantsPrefix: (agentId?: string) => (agentId === undefined ? 'g/' : `g/${agentId}/`),
  chat: (chatId: string) => `c/${chatId}`,
  chatsPrefix: 'c/',
  pair: (a: string, b: string) => `p/${a}/${b}`,
  member: (agentId: string, chatId: string) => `m/${agentId}/${chatId}`,
  membersPrefix: (agentId: string) => `m/${agentId}/`,
  stream: (streamId: string) => `s/${streamId}`,
  record: (streamId: string, generation: number, position: number) => `r/${streamId}/${pad(generation)}/${pad(position)}`,
  recordsPrefix: (streamId: string, generation: number) => `r/${streamId}/${pad(generation)}/`,
  operation: (streamId: string, operationId: string) => `o/${streamId}/${operationId}`,
  opLog: (streamId: string, generation: number, position: number) => `ol/${streamId}/${pad(generation)}/${pad(position)}`,
  opLogPrefix: (streamId: string) => `ol/${streamId}/`,
  messageId: (streamId: string, generation: number, clientMessageId: string) => `x/${streamId}/${pad(generation)}/${clientMessageId}`,
};
