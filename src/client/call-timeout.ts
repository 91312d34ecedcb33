/** Default of `ConnectOptions.callTimeoutMs`: 30 s. */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

/**
 * The timeout of one call: the per-call value, else the client's, else the default; 0 and
 * Infinity mean none (undefined). A long poll (`waitMs`) may legitimately stay silent that
 * long, so it is added on top.
 */
export function timeoutFor(clientMs: number | undefined, callMs: number | undefined, params: unknown): number | undefined {
  const ms = callMs ?? clientMs ?? DEFAULT_CALL_TIMEOUT_MS;
  if (!(ms > 0) || ms === Infinity) return undefined;
  const waitMs = typeof params === 'object' && params !== null ? (params as { waitMs?: unknown }).waitMs : undefined;
  return typeof waitMs === 'number' && waitMs > 0 ? ms + waitMs : ms;
}
