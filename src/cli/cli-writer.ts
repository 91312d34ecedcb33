import { randomUUID } from 'node:crypto';
import {
  ConnectionLostError,
  FencedError,
  TimeoutError,
  WriterActiveError,
  type AppendResult,
  type ParamsIn,
  type StreamState,
  type YelloClient,
} from '../client/index.js';
import { sessionAgentId } from './context.js';
import { CliError, EXIT } from './output.js';
import type { WriterStore } from './writer-state.js';

type Records = ParamsIn<'streams.append'>['records'];

/** Same length as a real coordinator token (`yello_ct_` + 43 base64url characters). */
const TOKEN_PLACEHOLDER = 'yello_ct_' + 'x'.repeat(43);
/** Request ids of the client are small counters; 16 digits is more than any will reach. */
const ID_PLACEHOLDER = 1e15;

/**
 * Bytes of the `streams.append` request line as the daemon measures it (docs/protocol.md §3.2):
 * the serialized JSON-RPC request without its newline.
 */
export function appendRequestBytes(params: ParamsIn<'streams.append'>): number {
  return Buffer.byteLength(JSON.stringify({ jsonrpc: '2.0', id: ID_PLACEHOLDER, method: 'streams.append', params }), 'utf8');
}

/**
 * The CLI as the long-lived writer of one stream. It keeps its coordinator token in the
 * {@link WriterStore} and reuses it, so consecutive commands append no writer fences; it claims
 * only when it holds no token, or when its token was fenced (taking over from another
 * coordinator only with `replace`). Everything that can be refused locally is refused before
 * any claim.
 */
export class CliWriter {
  readonly #client: YelloClient;
  readonly #store: WriterStore;
  readonly #socket: string;
  readonly #agentId: string;
  readonly streamId: string;
  /** The claim could not be kept (no writable state dir): release it after this command. */
  #oneShot = false;

  constructor(client: YelloClient, store: WriterStore, socket: string, streamId: string) {
    this.#client = client;
    this.#store = store;
    this.#socket = socket;
    this.#agentId = sessionAgentId(client);
    this.streamId = streamId;
  }

  /** Append `records` as this stream's writer; with `release`, give the stream up afterwards. */
  async append(records: Records, opts: { replace: boolean; release: boolean }): Promise<AppendResult> {
    const operationId = `cli-${randomUUID()}`;
    const state = await this.#client.call('streams.get', { streamId: this.streamId });
    const token = this.#store.load(this.#socket, this.#agentId, this.streamId)?.coordinatorToken ?? null;
    // Without a kept token a claim comes first, and its fence moves the append one position on.
    this.#checkSize({
      streamId: this.streamId,
      coordinatorToken: token ?? TOKEN_PLACEHOLDER,
      generation: state.generation,
      expectedPosition: token ? state.nextPosition : (BigInt(state.nextPosition) + 1n).toString(),
      operationId,
      records,
    });
    // The append's result and the token it was made under.
    let sent: { result: AppendResult; token: string } | null = null;
    let wasFenced = false;
    if (token) {
      try {
        sent = { result: await this.#appendWith(token, state.generation, state.nextPosition, operationId, records), token };
      } catch (err) {
        if (!(err instanceof FencedError)) throw err;
        // Nothing was written under the stale token, so the operationId is still unused.
        this.#store.delete(this.#socket, this.#agentId, this.streamId);
        wasFenced = true;
      }
    }
    if (!sent) {
      const current = wasFenced ? await this.#client.call('streams.get', { streamId: this.streamId }) : state;
      const claim = await this.#claim(current, opts.replace, wasFenced);
      const claimed = claim.coordinatorToken;
      sent = { result: await this.#appendWith(claimed, claim.generation, claim.nextPosition, operationId, records), token: claimed };
    }
    if (opts.release) await this.release(sent.token);
    else if (this.#oneShot)
      await this.#client.call('streams.release', { streamId: this.streamId, coordinatorToken: sent.token }).catch(() => {});
    return sent.result;
  }

  /** Release the stream with `token` (default: the stored one) and forget it. */
  async release(token?: string): Promise<StreamState> {
    const t = token ?? this.#store.load(this.#socket, this.#agentId, this.streamId)?.coordinatorToken;
    if (!t)
      throw new CliError(
        `this CLI holds no claim on ${this.streamId} (see --state-dir); pass --coordinator-token-file to release another claim`,
        EXIT.error,
      );
    try {
      return await this.#client.call('streams.release', { streamId: this.streamId, coordinatorToken: t });
    } finally {
      // Fenced or released: either way the token is of no further use.
      this.#store.delete(this.#socket, this.#agentId, this.streamId);
    }
  }

  /** Whether this CLI holds a stored claim on the stream. */
  holdsClaim(): boolean {
    return this.#store.load(this.#socket, this.#agentId, this.streamId) !== null;
  }

  #checkSize(params: ParamsIn<'streams.append'>): void {
    const limit = this.#client.session.limits.maxAppendRequestBytes;
    const size = appendRequestBytes(params);
    if (size > limit) {
      throw new CliError(
        `the message is too large: the append request would be ${size} bytes, over the daemon's limit of ${limit} bytes (nothing was sent)`,
        EXIT.error,
      );
    }
  }

  /**
   * Claim the stream and store the token. `wasFenced`: our stored token had been fenced, so a
   * coordinator holding the stream now is someone else, and taking over needs `replace`.
   */
  async #claim(state: StreamState, replace: boolean, wasFenced: boolean) {
    const other = state.writer.active;
    if (other && wasFenced && !replace) {
      throw new CliError(
        `the stream ${this.streamId} was claimed by another coordinator (epoch ${state.writer.epoch}) since this CLI last wrote to it; pass --replace to take it over`,
        EXIT.fenced,
      );
    }
    let claim;
    try {
      claim = await this.#client.call('streams.claim', { streamId: this.streamId, replace, reason: 'yello cli' });
    } catch (err) {
      if (err instanceof WriterActiveError)
        throw new CliError(`a coordinator holds ${this.streamId}; pass --replace to take over`, EXIT.error);
      throw err;
    }
    if (other && replace)
      process.stderr.write(`yello: the stream was claimed by another coordinator; took it over (epoch ${claim.epoch})\n`);
    else if (wasFenced)
      process.stderr.write(`yello: this CLI's claim on ${this.streamId} was released or reset; claimed it again (epoch ${claim.epoch})\n`);
    try {
      this.#store.save({
        socket: this.#socket,
        agentId: this.#agentId,
        streamId: this.streamId,
        coordinatorToken: claim.coordinatorToken,
        epoch: claim.epoch,
      });
    } catch (err) {
      // No writable state dir (a service user without a home, say): still send, the old way.
      this.#oneShot = true;
      const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      process.stderr.write(
        `yello: cannot keep the claim between commands (${reason} in the CLI state dir; pass --state-dir): this command claims and releases the stream\n`,
      );
    }
    return claim;
  }

  async #appendWith(
    coordinatorToken: string,
    generation: string,
    expectedPosition: string,
    operationId: string,
    records: Records,
  ): Promise<AppendResult> {
    try {
      return await this.#client.call('streams.append', {
        streamId: this.streamId,
        coordinatorToken,
        generation,
        expectedPosition,
        operationId,
        records,
      });
    } catch (err) {
      if ((err instanceof ConnectionLostError && err.outcomeUnknown) || err instanceof TimeoutError) {
        throw new CliError(
          `the answer to the append was lost; whether it committed is unknown: check with \`yello ops show ${this.streamId} ${operationId}\` before sending again (or resend with the same --message-id)`,
          EXIT.error,
        );
      }
      throw err;
    }
  }
}
