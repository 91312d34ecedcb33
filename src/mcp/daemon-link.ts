import { ConnectionLostError, UnauthenticatedError, YelloClient, type MethodResults, type ParamsIn } from '../client/index.js';
import { ToolFailure } from './tool-errors.js';
import { untilConnected } from './waits.js';

/** Methods the link may repeat after a connection loss: reads, and the create-or-find `chats.open`. */
export type RetryableMethod =
  | 'agents.get'
  | 'agents.list'
  | 'grants.list'
  | 'daemon.status'
  | 'chats.get'
  | 'chats.list'
  | 'chats.open'
  | 'chats.permissions'
  | 'chats.history'
  | 'streams.get'
  | 'streams.read'
  | 'operations.get'
  | 'keys.list';

const FIX_TOKEN =
  "A person must fix this MCP server's configuration: write the agent's token to a file with `yello agents add NAME --token-out FILE` (a new agent) or `yello agents rotate-token NAME --token-out FILE` (an existing one; its old token stops working), set YELLO_TOKEN_FILE to that file in the MCP client's configuration (`yello --token-file FILE mcp --print-config` checks it and prints the entry), then restart the MCP client. Until then every tool answers this error.";

/** The daemon refused the token at hello: no tool can work (a setup problem, not the agent's). */
function refusedTokenFailure(socketPath: string): ToolFailure {
  return new ToolFailure(
    'BAD_TOKEN',
    `the daemon at ${socketPath} does not accept the token this MCP server was started with: it is no agent's token (mistyped, rotated, the agent disabled, a file holding something else, or another daemon's token)`,
    FIX_TOKEN,
    { socketPath },
  );
}

/** The admin token: `yello mcp` acts as one agent and refuses it for every tool. */
function adminTokenFailure(): ToolFailure {
  return new ToolFailure(
    'BAD_TOKEN',
    'yello mcp acts as an agent, but it was started with the admin token; it does nothing with it',
    FIX_TOKEN,
  );
}

/** Options of a {@link DaemonLink}. */
export interface DaemonLinkOptions {
  socketPath: string;
  token: string;
  callTimeoutMs?: number;
  /** How long a retryable call waits for the connection to come back (a daemon restart) before it fails. */
  retryForMs?: number;
  reconnect?: { minDelayMs?: number; maxDelayMs?: number };
}

/**
 * The MCP server's one connection to the daemon, shared by every chat session (their
 * conversations and writers) and the lookups of the tools. It dials on first use (a daemon that
 * starts after the server is no error) and then reconnects by itself: the client library's
 * reconnect and its one backoff. A call that is safe to repeat (`RetryableMethod`) waits for
 * the reconnect and is repeated, so a daemon restart is invisible to the agent beyond a short
 * wait; appends never go through {@link call}. A token the daemon refuses, or the admin token,
 * fails every use with a BAD_TOKEN {@link ToolFailure} that says how to fix the setup.
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

  /** The client, dialling once (shared by concurrent callers) until the first connect succeeded. */
  async client(): Promise<YelloClient> {
    if (this.#closed) throw new ConnectionLostError('the MCP server is shutting down', false);
    if (this.#client) return this.#client;
    this.#dialing ??= YelloClient.connect({
      socketPath: this.#opts.socketPath,
      token: this.#opts.token,
      clientName: 'yello-mcp',
      reconnect: this.#opts.reconnect ?? true,
      ...(this.#opts.callTimeoutMs !== undefined ? { callTimeoutMs: this.#opts.callTimeoutMs } : {}),
    }).then(
      (c) => {
        this.#dialing = null;
        if (c.session.role !== 'agent') {
          c.close();
          throw adminTokenFailure();
        }
        if (this.#closed) c.close();
        this.#client = c;
        return c;
      },
      (err: unknown) => {
        this.#dialing = null;
        throw err instanceof UnauthenticatedError ? refusedTokenFailure(this.#opts.socketPath) : err;
      },
    );
    return this.#dialing;
  }

  /** Resolves once `client` is connected again, or after `ms`. */
  #reconnected(client: YelloClient, ms: number): Promise<void> {
    // Connected again, or the client gave up dialling (then the call fails as it is).
    return untilConnected(client, ms, () => client.connected || !client.reconnecting);
  }

  /** Call a method that is safe to repeat; a lost connection is waited for (up to `retryForMs`) and the call repeated. */
  async call<M extends RetryableMethod>(method: M, params: ParamsIn<M>): Promise<MethodResults[M]> {
    const deadline = Date.now() + (this.#opts.retryForMs ?? 15_000);
    for (;;) {
      const client = await this.client();
      try {
        return await client.call(method, params);
      } catch (err) {
        if (!(err instanceof ConnectionLostError) || this.#closed || !client.reconnecting || Date.now() >= deadline) throw err;
        await this.#reconnected(client, deadline - Date.now());
      }
    }
  }

  close(): void {
    this.#closed = true;
    this.#client?.close();
  }
}
