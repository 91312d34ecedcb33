import type { z } from 'zod';
import { methods, type MethodName, type MethodOf } from './methods.js';

/**
 * Params validation at the daemon's edge: the param schema of every method, as a view of the
 * method table (methods.ts), and the mapping of a schema issue to INVALID_PARAMS details.
 */

export { appendMessageSchema, appendReceiptSchema, decimal, id, label, streamIdSchema, text } from './schema-parts.js';
export type { MethodName, Params, ParamsIn } from './methods.js';

/** Param schemas keyed by method name (each descriptor's `params`). */
export const paramSchemas = Object.fromEntries(Object.values(methods).map((d) => [d.name, d.params])) as {
  readonly [M in MethodName]: MethodOf<M>['params'];
};

/** Turn the first schema issue into INVALID_PARAMS details (`path`, `reason`). */
export function describeIssue(issue: z.core.$ZodIssue): { path: string; reason: string } {
  const path = issue.path.map(String).join('.');
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0] ?? '';
    return { path: path ? `${path}.${key}` : key, reason: 'unknown parameter' };
  }
  return { path, reason: issue.message };
}
