import type { ZodType } from 'zod';

/** Who may call a method. Finer checks (participant, author) happen in the handler. */
export type Access = 'public' | 'authenticated' | 'agent' | 'admin';

/**
 * The key of the type-only slot that carries a method's result type. Never set at runtime: it
 * exists so `Result<M>` can be read off the descriptor (as vscode-jsonrpc's `RequestType` does).
 */
export declare const RESULT_TYPE: unique symbol;

/** What a method's definition spells out. */
export interface MethodSpec<Name extends string = string, Params extends ZodType = ZodType> {
  /** `namespace.name`; the namespace groups the client's `rpc.<namespace>.<name>()`. */
  readonly name: Name;
  /** Validates and normalises params at the daemon's edge; its input type is what callers send. */
  readonly params: Params;
  readonly access: Access;
  /** One line for the API document. */
  readonly summary: string;
  /** The result's shape in words, for the API document (the checked type is the descriptor's result type). */
  readonly result: string;
}

/**
 * One RPC method: name, params schema, access, docs, and (type-only) result type. The daemon's
 * dispatcher, its handler types, the client's typed calls, the CLI (through the client) and
 * the OpenRPC document all derive from these descriptors.
 */
export interface MethodDescriptor<Name extends string = string, Params extends ZodType = ZodType, Result = unknown> extends MethodSpec<
  Name,
  Params
> {
  readonly [RESULT_TYPE]?: Result;
}

/**
 * Define a method whose handler returns `Result`. Curried so that the name and the params
 * schema are inferred while the result type is given:
 * `defineMethod<StreamState>()({ name: 'streams.get', params: …, access: 'authenticated', … })`.
 */
export function defineMethod<Result>() {
  return <const Name extends string, Params extends ZodType>(spec: MethodSpec<Name, Params>): MethodDescriptor<Name, Params, Result> =>
    spec;
}

/** The result type a descriptor carries. */
export type ResultOf<D> = D extends MethodDescriptor<string, ZodType, infer R> ? R : never;

/** Descriptors keyed by name, in definition order; a name defined twice is a bug caught at load. */
export function indexMethods<const L extends readonly MethodDescriptor[]>(list: L): { readonly [D in L[number] as D['name']]: D } {
  const table: Record<string, MethodDescriptor> = {};
  for (const d of list) {
    if (Object.hasOwn(table, d.name)) throw new Error(`method ${d.name} is defined twice`);
    table[d.name] = d;
  }
  return table as { readonly [D in L[number] as D['name']]: D };
}
