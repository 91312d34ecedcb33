import type { ConnectionHandle } from '../rpc/rpc-server.js';
import type { StreamMeta } from '../store/stream-meta.js';

/** What presence needs of a connection: to hear when it hangs up. */
export type Holder = Pick<ConnectionHandle, 'onHangUp'>;

interface Attachment {
  /** The claim the connections below used: a later claim starts a new attachment. */
  tokenHash: string;
  connections: Set<Holder>;
}

/**
 * Whether a stream's writer claim has a live holder (docs/protocol.md §5.8 `writer.connected`).
 * A claim is attached to the connection that made it, and to every connection that later
 * appends with its token; it is abandoned once none of them is open (once each has hung up: no more requests can come). Kept in memory only, on
 * purpose: after a daemon restart no connection of before is open, so every claim is abandoned
 * until a connection uses its token again.
 */
export class WriterPresence {
  readonly #byStream = new Map<string, Attachment>();
  /** The streams each open connection is attached to, so a close detaches it from all of them. */
  readonly #byHolder = new Map<Holder, Set<string>>();

  /** `holder` used the claim whose token hashes to `tokenHash` (a claim, an append). */
  attach(streamId: string, tokenHash: string, holder: Holder): void {
    let a = this.#byStream.get(streamId);
    if (a?.tokenHash !== tokenHash) {
      if (a) for (const h of a.connections) this.#byHolder.get(h)?.delete(streamId);
      a = { tokenHash, connections: new Set() };
      this.#byStream.set(streamId, a);
    }
    if (a.connections.has(holder)) return;
    a.connections.add(holder);
    let streams = this.#byHolder.get(holder);
    if (!streams) {
      streams = new Set();
      this.#byHolder.set(holder, streams);
      const mine = streams;
      // One hang-up listener per connection, however many streams and appends it has.
      holder.onHangUp(() => {
        this.#detach(holder, mine);
      });
    }
    streams.add(streamId);
  }

  /** Whether `meta`'s writer is active and a connection attached to its current claim is open. */
  connected(meta: StreamMeta): boolean {
    if (!meta.writer.active || meta.writer.tokenHash === null) return false;
    const a = this.#byStream.get(meta.streamId);
    return a !== undefined && a.tokenHash === meta.writer.tokenHash && a.connections.size > 0;
  }

  #detach(holder: Holder, streams: Set<string>): void {
    this.#byHolder.delete(holder);
    for (const streamId of streams) {
      const a = this.#byStream.get(streamId);
      if (!a) continue;
      a.connections.delete(holder);
      if (a.connections.size === 0) this.#byStream.delete(streamId);
    }
  }
}
