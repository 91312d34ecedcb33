// The RPC methods the contract names (docs/protocol.md §6), written out here rather than taken
// from src/: tests that check the daemon serves every one of them must not read the daemon's
// own list. Extensions of this project (daemon.check, streams.checkpoint) are not in it.

/** Every method of the contract, `session.hello` first. */
export const CONTRACT_METHODS = [
  'session.hello',
  'daemon.status',
  'keys.list',
  'keys.rotate',
  'agents.create',
  'agents.list',
  'agents.get',
  'agents.rotateToken',
  'agents.disable',
  'agents.setPolicy',
  'grants.add',
  'grants.remove',
  'grants.list',
  'chats.open',
  'chats.get',
  'chats.list',
  'chats.permissions',
  'chats.history',
  'chats.follow',
  'chats.unfollow',
  'streams.get',
  'streams.claim',
  'streams.release',
  'streams.append',
  'streams.read',
  'streams.trim',
  'streams.reset',
  'operations.get',
  'operations.list',
] as const;
