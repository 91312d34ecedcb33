// A tiny NDJSON server on a real Unix socket that stands in for a daemon the tests cannot
// make misbehave: one that never answers (hung), answers with a huge line, or is planted by
// another local user to collect tokens. It records every connection and every byte it got,
// so a test can prove what the client did or did not send. It shares no code with src/.

import net from 'node:net';

/** One parsed request line. */
export interface FakeRequest {
  jsonrpc?: string;
  id?: number | string | null;
  method?: string;
  params?: Record<string, unknown>;
}

/** Decides the answer to a request: a value to send as one JSON line, a raw string, or nothing. */
export type FakeHandler = (req: FakeRequest, socket: net.Socket) => unknown;

/** Limits as a real daemon announces them in `session.hello`. */
export const FAKE_LIMITS = { maxLineBytes: 1_048_576, maxAppendRequestBytes: 262_144 };

/** A `session.hello` answer. */
export function helloAnswer(req: FakeRequest, limits = FAKE_LIMITS): unknown {
  return {
    jsonrpc: '2.0',
    id: req.id,
    result: { role: 'admin', protocol: 'yello.chat.v1', daemon: { version: 'fake' }, limits, signing: { kid: 'k', alg: 'ES256' } },
  };
}

/** Answers hello, then never answers anything: a hung daemon. */
export const helloThenHang: FakeHandler = (req) => (req.method === 'session.hello' ? helloAnswer(req) : undefined);

/** The chat the fake daemon's Coordinator tests use: the caller `agt_a`, its peer `agt_b`. */
export const FAKE_CHAT = { agent: 'agt_a', peer: 'agt_b', chatId: 'chat_c' } as const;

/**
 * Results that let a Coordinator start in FAKE_CHAT, by method: hello as agt_a, chats.get with
 * both streams at `nextPosition` (agt_a's claimed), streams.claim and chats.follow.
 */
export function coordinatorStartResults(nextPosition: string): Record<string, unknown> {
  const { agent, peer, chatId } = FAKE_CHAT;
  const stream = (author: string) => ({
    streamId: `${chatId}:${author}`,
    chatId,
    authorAgentId: author,
    generation: '1',
    firstPosition: '0',
    nextPosition,
    acknowledged: null,
    writer: { epoch: author === agent ? '1' : '0', claimedAt: null, active: author === agent },
  });
  return {
    'session.hello': {
      role: 'agent',
      agentId: agent,
      protocol: 'yello.chat.v1',
      daemon: { version: 'fake' },
      limits: FAKE_LIMITS,
      signing: { kid: 'k', alg: 'ES256' },
    },
    'chats.get': { chat: { id: chatId, agentAId: agent, agentBId: peer }, streams: [stream(agent), stream(peer)] },
    // Before the claim (ChatWriter looks at the head first): nobody holds the stream.
    'streams.get': { ...stream(agent), writer: { epoch: '0', claimedAt: null, active: false, connected: false } },
    'streams.claim': { streamId: `${chatId}:${agent}`, generation: '1', epoch: '1', coordinatorToken: 'tok', nextPosition: '1' },
    'chats.follow': { subscriptionId: 'sub', cursor: 'c0' },
  };
}

export class FakeDaemon {
  readonly socketPath: string;
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();
  /** Connections accepted so far. */
  connections = 0;
  /** Bytes received on all connections. */
  bytes = 0;
  /** Every complete request line received, parsed. */
  readonly requests: FakeRequest[] = [];
  /** Every complete line received, raw. */
  readonly lines: string[] = [];

  private constructor(socketPath: string, handler: FakeHandler) {
    this.socketPath = socketPath;
    this.#server = net.createServer((socket) => {
      this.connections++;
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
      socket.on('error', () => {});
      let partial = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => {
        this.bytes += Buffer.byteLength(chunk);
        partial += chunk;
        let nl: number;
        while ((nl = partial.indexOf('\n')) !== -1) {
          const line = partial.slice(0, nl);
          partial = partial.slice(nl + 1);
          this.lines.push(line);
          let req: FakeRequest;
          try {
            req = JSON.parse(line) as FakeRequest;
          } catch {
            continue;
          }
          this.requests.push(req);
          const answer = handler(req, socket);
          if (answer === undefined) continue;
          socket.write(typeof answer === 'string' ? answer : JSON.stringify(answer) + '\n');
        }
      });
    });
  }

  /** Listen on `socketPath` (it must not exist). */
  static async start(socketPath: string, handler: FakeHandler = helloThenHang): Promise<FakeDaemon> {
    const d = new FakeDaemon(socketPath, handler);
    await new Promise<void>((resolve, reject) => {
      d.#server.once('error', reject);
      d.#server.listen(socketPath, () => {
        resolve();
      });
    });
    return d;
  }

  /** Drop every open connection (the client sees a loss); keep listening. */
  dropConnections(): void {
    for (const s of this.#sockets) s.destroy();
  }

  async close(): Promise<void> {
    this.dropConnections();
    await new Promise<void>((resolve) => {
      this.#server.close(() => {
        resolve();
      });
    });
  }
}
