import type { YelloClient } from '../client/index.js';
import { Waiters } from '../client/wait-queue.js';

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
  await untilConnected(client, ms, () => client.connected);
}

/**
 * Resolves once `done()` holds, looked at now and whenever `client` reconnects or loses its
 * connection, or after `ms`.
 */
export async function untilConnected(client: YelloClient, ms: number, done: () => boolean): Promise<void> {
  if (done()) return;
  const changes = new Waiters();
  const wake = () => {
    changes.wake();
  };
  const offs = [client.on('reconnected', wake), client.on('disconnected', wake)];
  try {
    await changes.until(done, ms);
  } finally {
    for (const off of offs) off();
  }
}
