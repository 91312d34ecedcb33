import type { Writable } from 'node:stream';
import { ChatWriter, FencedError, WriterActiveError, type ParamsIn, type StreamState, type YelloClient } from '../client/index.js';
import { splitStreamId } from '../shared/ids.js';
import { writerActiveError } from './break-advice.js';
import { sessionAgentId, socketPath, type GlobalArgs } from './context.js';
import { CliError, EXIT } from './output.js';
import { cliStateDir, WriterStore } from './writer-state.js';

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
 * The CLI as the writer of the agent's stream in one chat: the library's {@link ChatWriter},
 * with the claim's coordinator token kept in the {@link WriterStore} between commands.
 *
 * Why it keeps a claim file at all (issue 20): so that consecutive `send`/`ack` commands append
 * one writer fence, not one each. The kept claim locks nobody out: between commands no
 * connection is attached to it, so the daemon reports it abandoned (`writer.connected: false`)
 * and `yello mcp`, a Coordinator or `chats follow --ack` of the same agent take it over with
 * `replace: "if-abandoned"`, their default, without `--replace`. The CLI claims the same way: a
 * kept token that was fenced meanwhile is claimed again if the holder is gone, and only a
 * holder connected right now refuses it (`WRITER_ACTIVE`, whose advice names
 * `yello streams release`).
 */
export class CliWriter {
  readonly #client: YelloClient;
  readonly #store: WriterStore;
  readonly #socket: string;
  readonly #agentId: string;
  readonly #stderr: Writable;
  readonly streamId: string;

  constructor(client: YelloClient, store: WriterStore, socket: string, streamId: string, stderr: Writable) {
    this.#client = client;
    this.#store = store;
    this.#socket = socket;
    this.#agentId = sessionAgentId(client);
    this.#stderr = stderr;
    this.streamId = streamId;
  }

  /** The writer of `streamId` in a command: its claim kept in the CLI state dir, its notices on the run's stderr. */
  static for(args: GlobalArgs, client: YelloClient, streamId: string): CliWriter {
    const store = new WriterStore(cliStateDir(args['state-dir'], args.io.env));
    return new CliWriter(client, store, socketPath(args), streamId, args.io.stderr);
  }

  #kept(): string | null {
    return this.#store.load(this.#socket, this.#agentId, this.streamId)?.coordinatorToken ?? null;
  }

  /**
   * Refuse locally what the daemon would refuse for size (the 256 KiB append cap), before any
   * claim: a claim's fence would move the append one position on, so that is assumed.
   */
  checkSize(records: ParamsIn<'streams.append'>['records'], state: StreamState): void {
    const limit = this.#client.session.limits.maxAppendRequestBytes;
    const size = appendRequestBytes({
      streamId: this.streamId,
      coordinatorToken: TOKEN_PLACEHOLDER,
      generation: state.generation,
      expectedPosition: (BigInt(state.nextPosition) + 1n).toString(),
      operationId: `cli-${'x'.repeat(36)}`,
      records,
    });
    if (size > limit) {
      throw new CliError(
        `the message is too large: the append request would be ${size} bytes, over the daemon's limit of ${limit} bytes (nothing was sent)`,
        EXIT.error,
      );
    }
  }

  /**
   * Run `fn` with a ChatWriter that resumes the kept claim (or claims on its first write), then
   * keep its token for the next command, or release it (`release`, or no usable state dir).
   */
  async run<T>(opts: { replace: boolean; release: boolean }, fn: (writer: ChatWriter) => Promise<T>): Promise<T> {
    const chatId = splitStreamId(this.streamId)?.chatId;
    if (!chatId) throw new CliError(`not a stream id: ${this.streamId}`, EXIT.usage);
    const held = this.#store.load(this.#socket, this.#agentId, this.streamId);
    if (held?.uncertainOperationId) throw this.#paused(held.uncertainOperationId);
    const kept = held?.coordinatorToken ?? null;
    const writerWith = (token: string | null) => {
      const w = new ChatWriter(this.#client, {
        chatId,
        replace: opts.replace ? true : 'if-abandoned',
        reason: 'yello cli',
        ...(token ? { coordinatorToken: token } : {}),
      });
      w.on('claimed', (c) => {
        if (c.tookOver)
          this.#stderr.write(`yello: took over the claim on ${this.streamId} from another coordinator (now epoch ${c.epoch})\n`);
      });
      return w;
    };
    let writer = writerWith(kept);
    let result: T;
    try {
      try {
        result = await fn(writer);
      } catch (err) {
        // The kept claim was taken over, released or reset meanwhile; nothing was written under
        // it, so claim (as the options say) and write once more.
        if (!(kept && err instanceof FencedError)) throw err;
        this.#store.delete(this.#socket, this.#agentId, this.streamId);
        writer = writerWith(null);
        result = await fn(writer);
        this.#stderr.write(
          `yello: the claim this CLI kept on ${this.streamId} had been taken over, released or reset; claimed it again (epoch ${writer.epoch ?? '?'})\n`,
        );
      }
    } catch (err) {
      const uncertain = writer.uncertainOperationId;
      if (uncertain) {
        // Kept with the claim, so that the next command (and `yello attach`) waits for it to be settled.
        const token = writer.coordinatorToken;
        if (token) this.#keep(token, writer.epoch ?? '0', uncertain);
        throw new CliError(
          `the answer to the append was lost; whether it committed is unknown: check with \`yello ops show ${this.streamId} ${uncertain}\` before sending again (until then this stream's sends and \`yello attach\` wait)`,
          EXIT.error,
        );
      }
      if (err instanceof WriterActiveError) throw writerActiveError(err, this.streamId);
      throw err;
    }
    const token = writer.coordinatorToken;
    if (opts.release || !token) {
      this.#store.delete(this.#socket, this.#agentId, this.streamId);
      await writer.release();
    } else if (token !== kept) await this.#save(token, writer.epoch ?? '0');
    return result;
  }

  #paused(operationId: string): CliError {
    return new CliError(
      `an earlier append under the claim this CLI keeps on ${this.streamId} has an unknown outcome (operation ${operationId}); nothing was sent: run \`yello ops show ${this.streamId} ${operationId}\` first, which settles it`,
      EXIT.error,
    );
  }

  /** Keep the claim with an append of unknown outcome marked; no usable state dir: the message already says what to do. */
  #keep(token: string, epoch: string, uncertainOperationId: string): void {
    const claim = { socket: this.#socket, agentId: this.#agentId, streamId: this.streamId, coordinatorToken: token, epoch };
    try {
      this.#store.save({ ...claim, uncertainOperationId });
    } catch {
      /* the error thrown next names the operation to check */
    }
  }

  async #save(token: string, epoch: string): Promise<void> {
    try {
      this.#store.save({ socket: this.#socket, agentId: this.#agentId, streamId: this.streamId, coordinatorToken: token, epoch });
    } catch (err) {
      // No writable state dir (a service user without a home, say): still send, the old way.
      const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      this.#stderr.write(
        `yello: cannot keep the claim between commands (${reason} in the CLI state dir; pass --state-dir): this command claims and releases the stream\n`,
      );
      await this.#client.call('streams.release', { streamId: this.streamId, coordinatorToken: token }).catch(() => {});
    }
  }

  /** Release the stream with `token` (default: the kept one) and forget it. */
  async release(token?: string): Promise<StreamState> {
    const t = token ?? this.#kept();
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
}

/**
 * `yello ops show` as the agent found `operationId` settled (committed, or never admitted): a
 * claim the CLI keeps on the stream that an append of unknown outcome paused goes on (and so
 * does `yello attach` presenting into its pane). Says so on stderr when it did.
 */
export function settleKept(args: GlobalArgs, client: YelloClient, streamId: string, operationId: string, state: string): void {
  const agentId = client.session.agentId;
  if (state === 'pending' || !agentId) return;
  try {
    if (new WriterStore(cliStateDir(args['state-dir'], args.io.env)).settle(socketPath(args), agentId, streamId, operationId))
      args.io.stderr.write(`yello: settled (${state}): sends under the claim kept on ${streamId}, and yello attach, go on\n`);
  } catch (err) {
    args.io.stderr.write(`yello: cannot update the CLI state: ${(err as Error).message}\n`);
  }
}
