import { randomUUID } from 'node:crypto';
import type { ParamsIn } from '../shared/method-types.js';
import type { AppendResult } from '../shared/types.js';
import type { NativeAdapter, PeerBatch, UncertainOutcome } from './coordinator-types.js';
import { FencedError, YelloClientError, fencedError } from './errors.js';
import type { OwnedStream } from './peer-feed.js';
import { isOutcomeUnknown, lookUpOperation } from './uncertain.js';
import type { YelloClient } from './yello-client.js';

/** The outbound stream as appends need it: the claim's token and where the next append goes. */
export interface WritableStream extends OwnedStream {
  token: string;
  nextPosition: string;
}

/** What an {@link Outbox} needs from its coordinator, whose phase decides what may be sent. */
export interface OutboxHost {
  readonly adapter: NativeAdapter;
  own(): WritableStream;
  /** The connection to append with now, or throws why nothing may be appended (stopped, paused, reconnecting). */
  appendVia(): YelloClient;
  /** The append of unknown outcome to settle, or null. */
  uncertain(): string | null;
  /** While paused: the live connection to ask with, or null while it reconnects. Throws once stopped. */
  askVia(): YelloClient | null;
  /** An append's outcome became unknown: pause. */
  pause(operationId: string, error: Error): void;
  /** The pause is settled. */
  resume(): void;
  fail(err: Error): void;
}

type Records = ParamsIn<'streams.append'>['records'];

/**
 * The writing side of a Coordinator: appends one at a time, fenced by the claim's token at
 * the stream's next position. An append whose outcome is unknown pauses the coordinator and
 * is never resent; `resolve()` asks the daemon how it ended.
 */
export class Outbox {
  readonly #host: OutboxHost;
  #chain: Promise<unknown> = Promise.resolve();

  constructor(host: OutboxHost) {
    this.#host = host;
  }

  /** Resolves once every append handed out has its answer. */
  settled(): Promise<unknown> {
    return this.#chain;
  }

  /** A message, and optionally a receipt for `ack`, in one atomic append. */
  send(text: string, options: { ack?: PeerBatch; messageId?: string }): Promise<AppendResult> {
    const message = { type: 'chat.message' as const, messageId: options.messageId ?? randomUUID(), content: text };
    return this.#append(options.ack ? [message, receiptFor(options.ack)] : [message]);
  }

  /** A receipt acknowledging a presented peer batch. */
  ack(batch: PeerBatch): Promise<AppendResult> {
    return this.#append([receiptFor(batch)]);
  }

  #append(records: Records): Promise<AppendResult> {
    const run = async (): Promise<AppendResult> => {
      const client = this.#host.appendVia();
      const operationId = `op-${randomUUID()}`;
      const own = this.#host.own();
      try {
        const result = await client.call('streams.append', {
          streamId: own.streamId,
          coordinatorToken: own.token,
          generation: own.generation,
          expectedPosition: own.nextPosition,
          operationId,
          records,
        });
        own.nextPosition = result.nextPosition;
        return result;
      } catch (err) {
        if (isOutcomeUnknown(err)) {
          this.#host.pause(operationId, err as Error);
          await this.#host.adapter.uncertain?.({ operationId, error: err as Error });
        } else if (err instanceof FencedError) {
          this.#host.fail(err);
        }
        throw err;
      }
    };
    const p = this.#chain.then(run, run);
    this.#chain = p.catch(() => {});
    return p;
  }

  /**
   * Ask the daemon (`operations.get`) whether the append of unknown outcome committed, tell
   * the adapter, and resume. Nothing is resent.
   */
  async resolve(): Promise<UncertainOutcome> {
    const operationId = this.#host.uncertain();
    if (operationId === null) throw new YelloClientError('BAD_STATE', 'no append of unknown outcome');
    const own = this.#host.own();
    for (;;) {
      const client = this.#host.askVia();
      const found = client
        ? await lookUpOperation(client, own.streamId, operationId)
        : await new Promise<null>((r) => setTimeout(r, 50, null));
      if (!found) continue;
      const { operation, head } = found;
      if (head.writer.epoch !== own.epoch || !head.writer.active) {
        const err = fencedError(own.streamId, head.writer.epoch, 'replaced while paused');
        this.#host.fail(err);
        throw err;
      }
      const outcome: UncertainOutcome = { operationId, committed: operation.state === 'committed', operation };
      own.nextPosition = head.nextPosition;
      await this.#host.adapter.resolved?.(outcome);
      this.#host.resume();
      return outcome;
    }
  }
}

function receiptFor(batch: PeerBatch) {
  return {
    type: 'chat.receipt' as const,
    peerStreamId: batch.streamId,
    peerGeneration: batch.generation,
    nextPosition: batch.nextPosition,
    batchId: batch.batchId,
  };
}
