import type { YelloClient } from '../client/index.js';

/** Settles with `p` unless `ms` pass first; then fails with `timeout()` (p keeps running). */
export async function within<T>(p: Promise<T>, ms: number, timeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>(
        (_, reject) =>
          (timer = setTimeout(() => {
            reject(timeout());
          }, ms)),
      ),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves once `client` is connected (at once if it is), or after `ms`: nothing is written meanwhile. */
export async function whenConnected(client: YelloClient, ms: number): Promise<void> {
  if (client.connected) return;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    const off = client.on('reconnected', done);
    function done() {
      clearTimeout(timer);
      off();
      resolve();
    }
  });
}
