import type { MethodName } from './method-types.js';

/**
 * Every RPC method name, in the method table's order, without the table: the client builds its
 * `rpc.<namespace>.<name>()` functions from this list, so loading the client never loads zod
 * (only the daemon validates params). test/unit/contract-drift.test.ts checks that it names
 * exactly the table's methods.
 */
export const METHOD_NAMES = [
  'session.hello',
  'daemon.status',
  'daemon.metrics',
  'daemon.check',
  'daemon.backup',
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
  'chats.watch',
  'chats.unfollow',
  'streams.get',
  'streams.claim',
  'streams.release',
  'streams.append',
  'streams.read',
  'streams.checkpoint',
  'streams.trim',
  'streams.reset',
  'operations.get',
  'operations.list',
  'rpc.discover',
] as const satisfies readonly MethodName[];
