// The keys of the directory's values, engine-neutral (as stream-keys.ts for streams): LevelDB
// stores each value under its key (leveldb/key-layout.ts `K`), PostgreSQL binds each row body's
// checksum to the same key (postgres/row-codec.ts `RowKey`). One definition, because the checksum
// of every stored value covers its key: a rename in one of two copies would turn every row of the
// other engine into CORRUPT. test/store/stream-keys.test.ts pins every string.
//
// Ids never contain `/`.

export const DirectoryKeys = {
  agent: (agentId: string) => `a/${agentId}`,
  username: (username: string) => `u/${username}`,
  /** The token index: a token hash to its agent id. */
  token: (tokenHash: string) => `t/${tokenHash}`,
  grant: (agentId: string, peerAgentId: string) => `g/${agentId}/${peerAgentId}`,
  chat: (chatId: string) => `c/${chatId}`,
  /** The one chat of a pair (`a < b`). */
  pair: (a: string, b: string) => `p/${a}/${b}`,
  member: (agentId: string, chatId: string) => `m/${agentId}/${chatId}`,
};
