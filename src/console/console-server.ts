// `yello console`: one local web app over node:http, talking to the daemon through one admin
// client. The daemon keeps no HTTP surface; the admin token never reaches the browser.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname, networkInterfaces } from 'node:os';
import { NotFoundError, type YelloClient } from '../client/index.js';
import { ID_PATTERN } from '../shared/ids.js';
import { runAction } from './actions.js';
import { CONSOLE_CSS } from './assets/console-css.js';
import { CONSOLE_JS } from './assets/console-js.js';
import { feedChat } from './chat-feed.js';
import { exportFile } from './export-file.js';
import {
  allowedHosts,
  clearedCookie,
  consolePrefix,
  csrfOk,
  hostPort,
  isWildcard,
  SECURITY_HEADERS,
  sameOrigin,
  sessionCookie,
  SESSION_IDLE_MS,
  SESSION_LIFETIME_MS,
  Sessions,
  type Session,
} from './guard.js';
import { html } from './html.js';
import { gatherOverview } from './overview.js';
import { QuotaWatch } from './quota-watch.js';
import { chatPage, overviewPage, refusalPage, resultPage, verifyPage } from './pages.js';

/** Where the console listens. */
export interface ConsoleOptions {
  client: YelloClient;
  host: string;
  port: number;
}

/** A running console. */
export interface RunningConsole {
  /** The URL to open once: it carries the one-time secret. */
  readonly url: string;
  /** On a wildcard listen address, the same sign-in URL under each address of this host. */
  readonly otherUrls: string[];
  readonly port: number;
  /** The path every page lives under (the session cookie is scoped to it). */
  readonly prefix: string;
  /** Told the new sign-in URL after a sign-out or an expired session (print it where the owner looks). */
  onNewLink(listener: (url: string) => void): void;
  close(): Promise<void>;
}

/** The non-internal addresses of this host's interfaces, IPv4 first. */
function interfaceAddresses(): string[] {
  const all = Object.values(networkInterfaces()).flatMap((list) => list ?? []);
  const outside = all.filter((a) => !a.internal && !a.address.startsWith('fe80:'));
  return [...outside.filter((a) => a.family === 'IPv4'), ...outside.filter((a) => a.family !== 'IPv4')].map((a) => a.address);
}

/** Live tabs at once: each holds one of the connection's 64 subscriptions. */
const MAX_FEEDS = 32;
const MAX_FORM_BYTES = 64 * 1024;
const SESSION_HOURS = SESSION_LIFETIME_MS / 3600_000;
const IDLE_HOURS = SESSION_IDLE_MS / 3600_000;

class HttpRefusal extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    message: string,
  ) {
    super(message);
  }
}

function answer(res: ServerResponse, status: number, type: string, body: string | Buffer, headers: Record<string, string> = {}): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'Content-Type': type, ...headers });
  res.end(body);
}

const HTML = 'text/html; charset=utf-8';

async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  const type = req.headers['content-type'] ?? '';
  if (!type.startsWith('application/x-www-form-urlencoded'))
    throw new HttpRefusal(415, 'Not a form', 'state changes are posted as forms from the console page');
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_FORM_BYTES) throw new HttpRefusal(413, 'Too large', 'the form is too large');
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

/** Start the console; it serves until `close()`. */
export async function startConsole(options: ConsoleOptions): Promise<RunningConsole> {
  const { client } = options;
  // Quota refusals are counted by the daemon; the console remembers earlier counts (quota-watch.ts).
  const quotas = new QuotaWatch();
  const sessions = new Sessions();
  const prefix = consolePrefix();
  const linkListeners: Array<(url: string) => void> = [];
  let signInBase = '';
  let hosts = new Set<string>();
  let feeds = 0;
  const closing: Array<() => void> = [];

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!hosts.has(req.headers.host ?? ''))
      throw new HttpRefusal(
        421,
        'Wrong host',
        'this console answers only to the address it printed (a request naming another host is refused: DNS rebinding)',
      );
    const url = new URL(req.url ?? '/', 'http://console.invalid');
    if (req.method === 'GET' && url.pathname === '/favicon.ico') {
      res.writeHead(204, SECURITY_HEADERS).end();
      return;
    }
    // Outside its secret prefix the console has no pages (and says nothing of where they are).
    if (!url.pathname.startsWith(prefix)) throw new HttpRefusal(404, 'Not found', 'open the URL that yello console printed');
    const path = url.pathname.slice(prefix.length - 1);
    if (req.method === 'GET' && path === '/assets/console.js') {
      answer(res, 200, 'text/javascript; charset=utf-8', CONSOLE_JS);
      return;
    }
    if (req.method === 'GET' && path === '/assets/console.css') {
      answer(res, 200, 'text/css; charset=utf-8', CONSOLE_CSS);
      return;
    }
    if (req.method === 'GET' && path === '/login') {
      login(url, res);
      return;
    }
    const session = sessions.fromRequest(req);
    if (session === 'expired') {
      const renewed = newLink();
      throw new HttpRefusal(
        401,
        'Session expired',
        `sessions end ${SESSION_HOURS} hours after sign-in, or after ${IDLE_HOURS} hours without use; ${renewed ? 'a new sign-in URL was printed where yello console runs' : 'open the sign-in URL yello console printed last'}`,
      );
    }
    if (!session)
      throw new HttpRefusal(
        401,
        'Not signed in',
        'open the URL that yello console printed (it works once); after a sign-out or an expired session it prints a new one',
      );
    if (req.method === 'POST' && path === '/logout') return logout(req, res, session);
    if (req.method === 'POST') return post(req, res, session, path);
    if (req.method !== 'GET') throw new HttpRefusal(405, 'Method not allowed', 'only GET and POST');
    if (path === '/') {
      answer(res, 200, HTML, overviewPage(await gatherOverview(client, quotas), session, prefix));
      return;
    }
    if (path === '/verify') {
      answer(res, 200, HTML, verifyPage(session, prefix));
      return;
    }
    if (path === '/keys.json') {
      answer(res, 200, 'application/json', JSON.stringify(await client.call('keys.list', {})));
      return;
    }
    const m = /^\/chats\/([^/]+)(\/events|\/export\.jsonl)?$/.exec(path);
    const chatId = m?.[1];
    if (m && chatId !== undefined && ID_PATTERN.test(chatId)) {
      if (m[2] === '/events') return events(req, res, chatId);
      if (m[2] === '/export.jsonl') return exportJsonl(res, chatId, url.searchParams.get('partial') === '1');
      const { chat, streams } = await getChat(chatId);
      answer(res, 200, HTML, chatPage(chat, streams, session, prefix));
      return;
    }
    throw new HttpRefusal(404, 'Not found', 'no such page');
  }

  async function getChat(chatId: string): ReturnType<YelloClient['rpc']['chats']['get']> {
    try {
      return await client.call('chats.get', { chatId });
    } catch (err) {
      if (err instanceof NotFoundError) throw new HttpRefusal(404, 'No such chat', `no chat ${chatId}; the overview lists them`);
      throw err;
    }
  }

  function login(url: URL, res: ServerResponse): void {
    const r = sessions.exchange(url.searchParams.get('secret') ?? '');
    if (r === 'rate-limited') throw new HttpRefusal(429, 'Too many attempts', 'too many sign-in attempts; wait a minute');
    if (r === 'refused')
      throw new HttpRefusal(
        403,
        'Link used or wrong',
        'this sign-in link is wrong or was used already (it works once); restart yello console for a new one',
      );
    res.writeHead(303, { ...SECURITY_HEADERS, 'Set-Cookie': sessionCookie(r, prefix), Location: prefix });
    res.end();
  }

  /** A fresh one-time secret, printed by the command; false when an unused one is still out there. */
  function newLink(): boolean {
    if (sessions.secret !== null) return false;
    const link = `${signInBase}${prefix}login?secret=${sessions.renew()}`;
    for (const l of linkListeners) l(link);
    return true;
  }

  async function logout(req: IncomingMessage, res: ServerResponse, session: Session): Promise<void> {
    if (!sameOrigin(req)) throw new HttpRefusal(403, 'Cross-origin request', "sign-out is accepted only from the console's own pages");
    if (!csrfOk(session, (await readForm(req)).get('csrf') ?? undefined))
      throw new HttpRefusal(403, 'Stale form', 'the form is not from this session; reload the page');
    sessions.end(session);
    newLink();
    answer(
      res,
      200,
      HTML,
      refusalPage('Signed out', 'this browser is signed out; yello console printed a new one-time sign-in URL where it runs'),
      { 'Set-Cookie': clearedCookie(prefix) },
    );
  }

  async function post(req: IncomingMessage, res: ServerResponse, session: Session, path: string): Promise<void> {
    if (!sameOrigin(req))
      throw new HttpRefusal(403, 'Cross-origin request', "state changes are accepted only from the console's own pages");
    const form = await readForm(req);
    if (!csrfOk(session, form.get('csrf') ?? undefined))
      throw new HttpRefusal(403, 'Stale form', 'the form is not from this session; reload the page');
    const m = /^\/actions\/([a-z-]+)$/.exec(path);
    const name = m?.[1];
    const result = name === undefined ? null : await runAction(client, name, form);
    if (!result) throw new HttpRefusal(404, 'Not found', 'no such action');
    answer(
      res,
      result.ok ? 200 : 409,
      HTML,
      resultPage(result.title, result.message, result.back, result.ok, { prefix, csrf: session.csrf }),
    );
  }

  async function events(req: IncomingMessage, res: ServerResponse, chatId: string): Promise<void> {
    await getChat(chatId);
    if (feeds >= MAX_FEEDS)
      throw new HttpRefusal(503, 'Too many live views', `at most ${MAX_FEEDS} live chat views at once; close some tabs`);
    feeds++;
    res.writeHead(200, { ...SECURITY_HEADERS, 'Content-Type': 'text/event-stream; charset=utf-8', Connection: 'keep-alive' });
    // Reconnect fast after a break: the browser then reads the whole chat again.
    res.write('retry: 500\n\n');
    const closed = new Promise<void>((resolve) => {
      req.on('close', resolve);
      closing.push(resolve);
    });
    const ping = setInterval(() => res.write(': ping\n\n'), 15_000);
    try {
      await feedChat(client, chatId, (event, data) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`), closed);
    } finally {
      clearInterval(ping);
      feeds--;
      res.end();
    }
  }

  async function exportJsonl(res: ServerResponse, chatId: string, partial: boolean): Promise<void> {
    await getChat(chatId);
    const file = await exportFile(client, chatId, partial, { prefix });
    if (file.refusal !== null) answer(res, 409, HTML, file.refusal);
    else answer(res, 200, 'application/jsonl; charset=utf-8', file.body, { 'Content-Disposition': `attachment; filename="${file.name}"` });
  }

  const server: Server = createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
      if (res.headersSent) return void res.end();
      // Only a request under the prefix learns it (its refusal page links back into the console).
      const inside = (req.url ?? '').startsWith(prefix);
      if (err instanceof HttpRefusal) {
        answer(res, err.status, HTML, refusalPage(err.title, err.message, inside ? { prefix } : undefined));
        return;
      }
      answer(res, 500, HTML, resultPage('The daemon answered an error', html`${(err as Error).message}`, './', false, { prefix }));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  // On 0.0.0.0 or :: a browser names one of the host's addresses: answer to those, and print them.
  const addresses = isWildcard(options.host) ? interfaceAddresses() : [options.host];
  hosts = allowedHosts(options.host, port, addresses, isWildcard(options.host) ? hostname() : undefined);
  const [first = '127.0.0.1', ...others] = addresses;
  signInBase = `http://${hostPort(first, port)}`;
  const signIn = (base: string): string => `${base}${prefix}login?secret=${sessions.secret ?? ''}`;
  return {
    url: signIn(signInBase),
    otherUrls: others.map((a) => signIn(`http://${hostPort(a, port)}`)),
    port,
    prefix,
    onNewLink: (listener) => {
      linkListeners.push(listener);
    },
    close: async () => {
      for (const f of closing.splice(0)) f();
      server.closeAllConnections();
      await new Promise<void>((resolve) =>
        server.close(() => {
          resolve();
        }),
      );
    },
  };
}
