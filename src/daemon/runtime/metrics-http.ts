import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Audit } from '../rpc/audit.js';
import { openFileLimit, socketFd } from '../rpc/socket-fd.js';
import { fdHeadroom } from '../rpc/socket-server.js';
import { StartupError } from './startup-error.js';
import { metricsHostAllowed } from './metrics-host.js';
import { EXIT_CODES } from './exit-codes.js';
import { errorMessage } from './error-fields.js';
import type { Metrics } from './metrics.js';

/** The running `--metrics-listen` endpoint. */
export interface MetricsEndpoint {
  /** `http://HOST:PORT/metrics`, with the port actually bound (port 0 picks one). */
  readonly url: string;
  close(): Promise<void>;
}

/** Connections open at once: a Prometheus server keeps one; a newcomer past it closes the oldest idle one, or is closed. */
export const MAX_METRICS_CONNECTIONS = 8;
/** A connection with no request for this long is closed (a scrape takes milliseconds; Prometheus reconnects). */
export const METRICS_IDLE_MS = 10_000;

/** Why a bind failed, as one line and the daemon's exit code for it (§2.7). */
const BIND_ERRORS: Record<string, { text: string; exit: number }> = {
  EADDRINUSE: { text: 'the address is in use (another process listens there); pick another port', exit: EXIT_CODES.socketInUse },
  EACCES: { text: 'permission denied (a port below 1024 needs privileges); pick a port above 1023', exit: EXIT_CODES.permissionDenied },
  EADDRNOTAVAIL: { text: 'no interface of this host has that address', exit: EXIT_CODES.config },
};

/**
 * Serve the registry over HTTP for a Prometheus server: GET /metrics and nothing else (404 for
 * other paths, 405 for other methods, 421 for a `Host` that is not this endpoint's, see
 * metrics-host.ts), no request body read. It answers what `yello metrics` answers through the
 * socket; the address was checked to be loopback unless the operator allowed otherwise
 * (`src/cli/metrics-listen.ts`). Its connections are bounded like the socket's: at most
 * MAX_METRICS_CONNECTIONS, closed after `idleMs` without a request (METRICS_IDLE_MS; tests give
 * less), and refused when their fd would land in the headroom kept free below RLIMIT_NOFILE for
 * LevelDB's files (`fdHeadroom`), each refusal audited (`connection.refused`, `listener: "metrics"`).
 */
export async function listenMetrics(
  metrics: Metrics,
  address: { host: string; port: number },
  log: Logger,
  audit: Audit,
  idleMs = METRICS_IDLE_MS,
): Promise<MetricsEndpoint> {
  let bound: AddressInfo | null = null;
  const open = new Admitted(audit);
  const server = createServer((req, res) => {
    open.busy(req.socket, true);
    res.on('close', () => {
      open.busy(req.socket, false);
    });
    void answer(metrics, req, res, log, bound);
  });
  // A scraper sends one small request: slow or idle clients do not get to hold sockets open.
  server.headersTimeout = 5_000;
  server.requestTimeout = 10_000;
  server.keepAliveTimeout = 5_000;
  server.maxHeadersCount = 64;
  // The socket's idle timeout: also a connection that never sends a byte is closed.
  server.timeout = idleMs;
  server.on('connection', (socket: Socket) => {
    open.admit(socket);
  });
  const shown = address.host.includes(':') ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: address.host, port: address.port }, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    const code = (err as { code?: string }).code ?? '';
    const known = BIND_ERRORS[code];
    throw new StartupError(
      `cannot listen for metrics on ${shown}: ${known?.text ?? errorMessage(err)}${code ? ` (${code})` : ''}`,
      known?.exit ?? EXIT_CODES.config,
    );
  }
  server.on('error', (err) => {
    log.error({ err: { message: errorMessage(err) } }, 'metrics endpoint error');
  });
  bound = server.address() as AddressInfo;
  const host = bound.family === 'IPv6' ? `[${bound.address}]` : bound.address;
  return {
    url: `http://${host}:${bound.port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}

/**
 * The open connections, oldest first, and whether each has a request in progress: the cap and
 * the fd headroom are checked as each is accepted.
 */
class Admitted {
  readonly #audit: Audit;
  readonly #open = new Map<Socket, { busy: boolean }>();

  constructor(audit: Audit) {
    this.#audit = audit;
  }

  admit(socket: Socket): void {
    const fd = socketFd(socket);
    const limit = openFileLimit();
    if (fd !== null && limit !== null && fd >= limit - fdHeadroom(limit)) {
      this.#refuse(socket, 'FILE_DESCRIPTORS', { fd, fdLimit: limit, headroom: fdHeadroom(limit) });
      return;
    }
    if (this.#open.size >= MAX_METRICS_CONNECTIONS) {
      const idle = [...this.#open].find(([, s]) => !s.busy)?.[0];
      if (!idle) {
        this.#refuse(socket, 'MAX_CONNECTIONS', { max: MAX_METRICS_CONNECTIONS });
        return;
      }
      idle.destroy();
      this.#open.delete(idle);
    }
    this.#open.set(socket, { busy: false });
    socket.on('close', () => this.#open.delete(socket));
  }

  /** A request is being answered on `socket` (not idle: the oldest idle connection makes room, never a scrape). */
  busy(socket: Socket, busy: boolean): void {
    const state = this.#open.get(socket);
    if (state) state.busy = busy;
  }

  #refuse(socket: Socket, reason: 'FILE_DESCRIPTORS' | 'MAX_CONNECTIONS', fields: Record<string, number>): void {
    this.#audit.burst('connection.refused', `metrics:${reason}`, { listener: 'metrics', reason, connections: this.#open.size, ...fields });
    socket.destroy();
  }
}

async function answer(metrics: Metrics, req: IncomingMessage, res: ServerResponse, log: Logger, bound: AddressInfo | null): Promise<void> {
  if (!bound || !metricsHostAllowed(req.headers.host, bound)) {
    // DNS rebinding: a page at evil.example:PORT that resolves here must not read the scrape.
    plain(res, 421, 'misdirected request: this endpoint answers only to its own address (or localhost) in Host\n');
    return;
  }
  const path = (req.url ?? '').split('?')[0];
  if (path !== '/metrics') {
    plain(res, 404, 'not found: the only path is GET /metrics\n');
    return;
  }
  if (req.method !== 'GET') {
    res.setHeader('Allow', 'GET');
    plain(res, 405, 'method not allowed: the only request is GET /metrics\n');
    return;
  }
  try {
    const { contentType, text } = await metrics.scrape();
    res.writeHead(200, { 'Content-Type': contentType, 'Cache-Control': 'no-store' });
    res.end(text);
  } catch (err) {
    log.error({ err: { message: errorMessage(err) } }, 'metrics scrape failed');
    plain(res, 500, 'the scrape failed; see the daemon log\n');
  }
}

function plain(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' });
  res.end(text);
}
