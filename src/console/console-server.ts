// `yello console`: one local web app over node:http, talking to the daemon through one admin
// client. The daemon keeps no HTTP surface; the admin token never reaches the browser.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NotFoundError, type YelloClient } from '../client/index.js';
import { exportChat } from '../client/chat-export.js';
import { ID_PATTERN } from '../shared/ids.js';
import { runAction } from './actions.js';
import { CONSOLE_CSS } from './assets/console-css.js';
import { CONSOLE_JS } from './assets/console-js.js';
import { feedChat } from './chat-feed.js';
import { allowedHosts, csrfOk, SECURITY_HEADERS, sameOrigin, sessionCookie, Sessions, type Session } from './guard.js';
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
  readonly port: number;
  close(): Promise<void>;
}

/** Live tabs at once: each holds one of the connection's 64 subscriptions. */
const MAX_FEEDS = 32;
const MAX_FORM_BYTES = 64 * 1024;

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
    const path = url.pathname;
    if (req.method === 'GET' && path === '/assets/console.js') {
      answer(res, 200, 'text/javascript; charset=utf-8', CONSOLE_JS);
      return;
    }
    if (req.method === 'GET' && path === '/assets/console.css') {
      answer(res, 200, 'text/css; charset=utf-8', CONSOLE_CSS);
      return;
    }
    if (req.method === 'GET' && path === '/favicon.ico') {
      res.writeHead(204, SECURITY_HEADERS).end();
      return;
    }
    if (req.method === 'GET' && path === '/login') {
      login(url, res);
      return;
    }
    const session = sessions.fromRequest(req);
    if (!session)
      throw new HttpRefusal(
        401,
        'Not signed in',
        'open the URL that yello console printed (it works once); to get a new one, restart yello console',
      );
    if (req.method === 'POST') return post(req, res, session, path);
    if (req.method !== 'GET') throw new HttpRefusal(405, 'Method not allowed', 'only GET and POST');
    if (path === '/') {
      answer(res, 200, HTML, overviewPage(await gatherOverview(client, quotas), session));
      return;
    }
    if (path === '/verify') {
      answer(res, 200, HTML, verifyPage());
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
      answer(res, 200, HTML, chatPage(chat, streams, session));
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
    res.writeHead(303, { ...SECURITY_HEADERS, 'Set-Cookie': sessionCookie(r), Location: '/' });
    res.end();
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
    answer(res, result.ok ? 200 : 409, HTML, resultPage(result.title, result.message, result.back, result.ok));
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
    // Build it whole first: a failure then answers an error page, never half a file.
    const lines: string[] = [];
    const damage: string[] = [];
    for await (const item of exportChat(client, chatId)) {
      if ('record' in item) lines.push(JSON.stringify(item.record));
      else if ('checkpoint' in item) lines.push(JSON.stringify({ checkpoint: item.checkpoint }));
      else {
        const u = item.unexportable;
        damage.push(
          `${u.streamId} generation ${u.generation} ${u.fromPosition === null ? 'cannot be exported' : `is exported only below position ${u.fromPosition}`}: ${u.message}`,
        );
      }
    }
    // Damage is never downloaded silently: the person first reads what is missing.
    if (damage.length > 0 && !partial) {
      answer(
        res,
        409,
        HTML,
        resultPage(
          'The export would be incomplete',
          html`<ul>
              ${damage.map((d) => html`<li>${d}</li>`)}
            </ul>
            <p>
              <a href="/chats/${chatId}/export.jsonl?partial=1" download="${chatId}.partial.jsonl"
                >Download what verifies below the damage</a
              >
              (CLI: <code>yello chats export ${chatId}</code>, which exits 1 for the same reason)
            </p>`,
          `/chats/${chatId}`,
          false,
        ),
      );
      return;
    }
    answer(res, 200, 'application/jsonl; charset=utf-8', lines.map((l) => l + '\n').join(''), {
      'Content-Disposition': `attachment; filename="${chatId}${damage.length > 0 ? '.partial' : ''}.jsonl"`,
    });
  }

  const server: Server = createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
      if (res.headersSent) return void res.end();
      if (err instanceof HttpRefusal) {
        answer(res, err.status, HTML, refusalPage(err.title, err.message));
        return;
      }
      answer(res, 500, HTML, resultPage('The daemon answered an error', html`${(err as Error).message}`, '/', false));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  hosts = allowedHosts(options.host, port);
  const shownHost = options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    url: `http://${shownHost}:${port}/login?secret=${sessions.secret ?? ''}`,
    port,
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
