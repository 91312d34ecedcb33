import { z } from 'zod';
import { defineMethod, indexMethods, type ResultOf } from './method-descriptor.js';
import type { MethodName as PlainMethodName, MethodParams as PlainParams, MethodResults as PlainResults } from './method-types.js';
import { agentMethods } from './methods-agents.js';
import { chatMethods } from './methods-chats.js';
import { daemonMethods } from './methods-daemon.js';
import { streamMethods } from './methods-streams.js';

/**
 * The method table: one descriptor per RPC method (params schema, access, docs, result type),
 * the single source of the daemon's dispatch and handler types, the client's typed calls and
 * the API document. The descriptors live by noun (methods-daemon.ts, methods-agents.ts,
 * methods-chats.ts, methods-streams.ts); the table joins them in the API document's order.
 */
export const methods = indexMethods([
  ...daemonMethods,
  ...agentMethods,
  ...chatMethods,
  ...streamMethods,
  // The API's description of itself: this table as an OpenRPC document.
  defineMethod<Record<string, unknown>>()({
    name: 'rpc.discover',
    access: 'public',
    params: z.strictObject({}),
    summary: 'The OpenRPC document of this API.',
    result: 'OpenRPC document',
  }),
]);

/** Every RPC method name. */
export type MethodName = keyof typeof methods;
/** The descriptor of `M`. */
export type MethodOf<M extends MethodName> = (typeof methods)[M];
/** Params a caller sends for `M` (before normalisation). */
export type ParamsIn<M extends MethodName> = z.input<MethodOf<M>['params']>;
/** Params after validation, as handlers see them. */
export type Params<M extends MethodName> = z.output<MethodOf<M>['params']>;
/** What `M` answers: the type a handler must return and a client call resolves to. */
export type Result<M extends MethodName> = ResultOf<MethodOf<M>>;
/** Result types keyed by method name. */
export type MethodResults = { [M in MethodName]: Result<M> };

// The exact type equality test (each side's assignability alone would let optional and
// required params pass as the same).
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type MustBeNever<T extends never> = T;
type Both = MethodName & PlainMethodName;
/** Methods whose params or result differ from the zod-free types of method-types.ts (none). */
type TypeDrift = {
  [M in Both]: Same<ParamsIn<M>, PlainParams[M]> extends true ? (Same<Result<M>, PlainResults[M]> extends true ? never : M) : M;
}[Both];
/**
 * Compile-time proof that method-types.ts (what the client and its declarations use) names the
 * methods of this table and says what their params and results are: a drift fails the build,
 * naming the method.
 */
export type PlainTypesMatch = MustBeNever<TypeDrift>;
/** The same proof for the method names. */
export type PlainNamesMatch = MustBeNever<Same<MethodName, PlainMethodName> extends true ? never : 'the method names differ'>;
