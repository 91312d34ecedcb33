// Waiting in tests. A test waits for what it can observe (a notification arrived, a state
// changed, a log line appeared, a file exists) with `waitFor`, never for a fixed time: a fixed
// sleep is either too short on a loaded machine (flaky) or too long everywhere (slow).

/**
 * Polls `fn` until it returns something truthy and resolves with that value; fails with `what`
 * after `timeoutMs`. `fn` should read the real thing (a socket's notifications, a daemon's logs,
 * the file system, an RPC answer), not a flag the test set itself.
 */
export async function waitFor<T>(fn: () => T | Promise<T>, what: string, timeoutMs = 10_000, everyMs = 10): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/**
 * A fixed pause. Only where the passing of time is itself the subject (a rate-limit window, a
 * "nothing arrives within N ms" check, pacing a writer); every call says why in a comment.
 */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
