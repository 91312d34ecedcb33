import { ConnectionLostError, YelloClient, type MethodResults, type ParamsIn } from '../client/index.js';

/** Methods the link may retry after a connection loss: reads, and the create-or-find `chats.open`. */
export type RetryableMethod =
  | 'agents.get'
  | 'chats.get'
  | 'chats.list'
  | 'chats.open'
  | 'chats.permissions'
  | 'chats.history'
  | 'streams.get'
  | 'streams.read'
  | 'operations.get'
  | 'keys.list';

/** Options of a {@link DaemonLink}. */
export interface DaemonLinkOptions {
  socketPath: string;
  token: string;
  callTimeoutMs?: number;
  /** How long a retryable call keeps re-dialling after a loss (a daemon restart) before it fails. */
  retryForMs?: number;
}

/**
 * The MCP server's own connection to the daemon, for everything that is not a coordinator's
 * append: lookups, reads, history. It dials lazily and again after a loss, and repeats a call
 * only when repeating cannot change anything (`RetryableMethod`), so a daemon restart is
 * invisible to the agent beyond a short wait. Appends never go through here.
 */
export class DaemonLink {
  readonly #opts: DaemonLinkOptions;
  #client: YelloClient | null = null;
  #dialing: Promise<YelloClient> | null = null;
  #closed = false;

  constructor(options: DaemonLinkOptions) {
    this.#opts = options;
  }

  get socketPath(): string {
    return this.#opts.socketPath;
  }

  /** A connected client, dialling (once, shared by concurrent callers) when there is none. */
  async client(): Promise<YelloClient> {
    if (this.#closed) throw new ConnectionLostError('the MCP server is shutting down', false);
    if (this.#client?.connected) return this.#client;
    this.#dialing ??= YelloClient.connect({
      socketPath: this.#opts.socketPath,
      token: this.#opts.token,
      clientName: 'yello-mcp',
      ...(this.#opts.callTimeoutMs !== undefined ? { callTimeoutMs: this.#opts.callTimeoutMs } : {}),
    }).then(
      (c) => {
        this.#dialing = null;
        if (this.#closed) c.close();
        this.#client = c;
        return c;
      },
      (err: unknown) => {
        this.#dialing = null;
        throw err;
      },
    );
    return this.#dialing;
  }

  /** Call a method that is safe to repeat; connection losses are retried until `retryForMs` has passed. */
  async call<M extends RetryableMethod>(method: M, params: ParamsIn<M>): Promise<MethodResults[M]> {
    const deadline = Date.now() + (this.#opts.retryForMs ?? 10_000);
    for (let attempt = 0; ; attempt++) {
      try {
        const client = await this.client();
        return (await client.call(method, params)) as MethodResults[M];
      } catch (err) {
        if (!(err instanceof ConnectionLostError) || this.#closed || Date.now() >= deadline) throw err;
        await new Promise((r) => setTimeout(r, Math.min(1000, 50 * 2 ** attempt)));
      }
    }
  }

  close(): void {
    this.#closed = true;
    this.#client?.close();
  }
}
