// A `yello console` process bound to a test daemon, and plain HTTP requests to it with full
// control of Host, Origin and Cookie (what a browser would not let a test forge).

import { request } from 'node:http';
import type { Cli, LongRunningCli } from '../helpers/cli-runner.js';

export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request to 127.0.0.1:`port`; `headers.host` overrides the Host header. */
export function http(
  port: number,
  path: string,
  opts: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method: opts.method ?? 'GET', headers: { host: `127.0.0.1:${port}`, ...opts.headers } },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => (body += c));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        });
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** A running console: its printed URL and port; `signIn()` exchanges the secret for the session cookie. */
export interface ConsoleProcess {
  run: LongRunningCli;
  url: string;
  port: number;
  origin: string;
  /** The secret prefix every page lives under (from the printed URL), e.g. `/AbC…/`. */
  prefix: string;
  /** A console path (`/`, `/chats/…`) under the prefix. */
  path(p: string): string;
  /** Exchanges the printed secret; returns the `name=value` cookie. */
  signIn(): Promise<string>;
  /** The CSRF token in a page's forms. */
  csrfOf(cookie: string, path?: string): Promise<string>;
  /** Posts a form from the console's own origin with the session's CSRF token. */
  post(cookie: string, path: string, fields: Record<string, string>, headers?: Record<string, string>): Promise<HttpAnswer>;
}

/** Starts `yello console` (admin, through the CLI) and waits for its URL. `track` hands it to the fixture's afterAll. */
export async function startConsole(cli: Cli, track: (r: LongRunningCli) => LongRunningCli, args: string[] = []): Promise<ConsoleProcess> {
  const run = track(cli.start(['console', ...args], { timeoutMs: 10 * 60_000 }));
  const [url] = await run.waitForLines(1, 20_000);
  const port = Number(new URL(url!).port);
  const origin = `http://127.0.0.1:${port}`;
  const prefix = new URL(url!).pathname.replace(/login$/, '');
  const at = (p: string): string => prefix + p.replace(/^\//, '');
  const c: ConsoleProcess = {
    run,
    url: url!,
    port,
    origin,
    prefix,
    path: at,
    signIn: async () => {
      const u = new URL(url!);
      const r = await http(port, u.pathname + u.search);
      const set = r.headers['set-cookie'];
      if (r.status !== 303 || !set) throw new Error(`sign-in refused: ${r.status} ${r.body}`);
      return String(set[0]).split(';')[0]!;
    },
    csrfOf: async (cookie, path = '/') => {
      const r = await http(port, at(path), { headers: { cookie } });
      const m = /name="csrf" value="([^"]+)"/.exec(r.body);
      if (!m) throw new Error(`no csrf field on ${path}: ${r.status}`);
      return m[1]!;
    },
    post: async (cookie, path, fields, headers = {}) =>
      http(port, at(path), {
        method: 'POST',
        headers: { cookie, origin, 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams(fields).toString(),
      }),
  };
  return c;
}
