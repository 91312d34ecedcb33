import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { StartupError } from '../rpc/socket-server.js';
import { EXIT_CODES } from './exit-codes.js';
import { errorMessage } from './error-fields.js';
import type { Metrics } from './metrics.js';

/** The running `--metrics-listen` endpoint. */
export interface MetricsEndpoint {
  /** `http://HOST:PORT/metrics`, with the port actually bound (port 0 picks one). */
  readonly url: string;
  close(): Promise<void>;
}

/** Why a bind failed, as one line and the daemon's exit code for it (§2.7). */
const BIND_ERRORS: Record<string, { text: string; exit: number }> = {
  EADDRINUSE: { text: 'the address is in use (another process listens there); pick another port', exit: EXIT_CODES.socketInUse },
  EACCES: { text: 'permission denied (a port below 1024 needs privileges); pick a port above 1023', exit: EXIT_CODES.permissionDenied },
  EADDRNOTAVAIL: { text: 'no interface of this host has that address', exit: EXIT_CODES.config },
};

/**
 * Serve the registry over HTTP for a Prometheus server: GET /metrics and nothing else (404 for
 * other paths, 405 for other methods), no request body read. It answers what `yello metrics`
 * answers through the socket; the address was checked to be loopback unless the operator
 * allowed otherwise (`src/cli/metrics-listen.ts`).
 */
export async function listenMetrics(metrics: Metrics, address: { host: string; port: number }, log: Logger): Promise<MetricsEndpoint> {
  const server = createServer((req, res) => {
    void answer(metrics, req, res, log);
  });
  // A scraper sends one small request: slow or idle clients do not get to hold sockets open.
  server.headersTimeout = 5_000;
  server.requestTimeout = 10_000;
  server.keepAliveTimeout = 5_000;
  server.maxHeadersCount = 64;
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
  const bound = server.address() as AddressInfo;
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

async function answer(metrics: Metrics, req: IncomingMessage, res: ServerResponse, log: Logger): Promise<void> {
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
