// The console's safety on a shared host, over plain HTTP (docs/console.md "Safety"): the one-time
// secret, the session cookie, the Host allow-list, the Origin and CSRF checks on every POST,
// the CSP, escaping of daemon-provided text, and the loopback default of --listen.

import { describe, expect, it } from 'vitest';
import { expectExit } from '../helpers/cli-runner.js';
import { useCli } from '../helpers/use-daemon.js';
import { ok } from '../helpers/wire-fixtures.js';
import { http, startConsole, type ConsoleProcess } from './console-fixture.js';

const { cli, track, admin } = useCli();

describe('yello console over HTTP', () => {
  let c: ConsoleProcess;
  let cookie: string;

  it('prints a loopback URL under a secret prefix with a one-time secret; the exchange sets an HttpOnly SameSite=Strict cookie scoped to the prefix, with an expiry', async () => {
    c = await startConsole(cli(), track);
    expect(c.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/[A-Za-z0-9_-]{22}\/login\?secret=[A-Za-z0-9_-]{43}$/);
    const u = new URL(c.url);
    const r = await http(c.port, u.pathname + u.search);
    expect(r.status).toBe(303);
    expect(r.headers.location).toBe(c.prefix);
    const set = String(r.headers['set-cookie']);
    // Path: a browser sends cookies to every port of 127.0.0.1, but only under a matching path.
    expect(set).toBe(`${set.split(';')[0]}; HttpOnly; SameSite=Strict; Path=${c.prefix}; Max-Age=43200`);
    expect(set).toMatch(/^yello_console=[A-Za-z0-9_-]{43};/);
    cookie = set.split(';')[0]!;
    const page = await http(c.port, c.path('/'), { headers: { cookie } });
    expect(page.status).toBe(200);
    expect(page.body).toContain('Needs a person');
  });

  it('has no pages outside its prefix, and says nothing there of where they are', async () => {
    for (const p of ['/', '/login?secret=x', '/assets/console.js', '/chats/x', `/${c.prefix.slice(2)}`]) {
      const r = await http(c.port, p, { headers: { cookie } });
      expect(r.status, p).toBe(404);
      expect(r.body, p).not.toContain(c.prefix.slice(1, -1));
      expect(r.body, p).not.toContain('Needs a person');
    }
  });

  it('refuses the secret a second time, and a wrong one', async () => {
    const u = new URL(c.url);
    const again = await http(c.port, u.pathname + u.search);
    expect(again.status).toBe(403);
    expect(again.headers['set-cookie']).toBeUndefined();
    expect(again.body).toContain('works once');
    const wrong = await http(c.port, c.path('/login?secret=nope'));
    expect(wrong.status).toBe(403);
  });

  it('refuses a request without the cookie, or with a made-up one', async () => {
    for (const headers of [{}, { cookie: 'yello_console=made-up' }] as Record<string, string>[]) {
      const r = await http(c.port, c.path('/'), { headers });
      expect(r.status).toBe(401);
      expect(r.body).toContain('open the URL that yello console printed');
      expect(r.body).not.toContain('Needs a person');
    }
    const post = await http(c.port, c.path('/actions/grant-add'), {
      method: 'POST',
      headers: { origin: c.origin, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'agent=a&peer=b',
    });
    expect(post.status).toBe(401);
  });

  it('refuses a wrong Host (DNS rebinding), even with the session cookie', async () => {
    for (const host of ['evil.example', `evil.example:${c.port}`, `127.0.0.1:${c.port + 1}`]) {
      const r = await http(c.port, c.path('/'), { headers: { host, cookie } });
      expect(r.status, host).toBe(421);
      expect(r.body).not.toContain('Needs a person');
    }
    expect((await http(c.port, c.path('/'), { headers: { host: `localhost:${c.port}`, cookie } })).status).toBe(200);
  });

  it('refuses a cross-origin POST, one without Origin, and one without the CSRF token; the same form from the console works', async () => {
    const a = ok(await admin().call('agents.create', { username: 'guard-a', name: 'A' }));
    const b = ok(await admin().call('agents.create', { username: 'guard-b', name: 'B' }));
    const csrf = await c.csrfOf(cookie);
    const fields = { csrf, agent: 'guard-a', peer: 'guard-b', op: 'add' };
    const granted = async () => ok(await admin().call('grants.list', { agentId: a.agent.id })).grants.length;

    const cross = await c.post(cookie, '/actions/grant-add', fields, { origin: 'http://evil.example' });
    expect(cross.status).toBe(403);
    expect(cross.body).toContain('only from the console');
    const noOrigin = await http(c.port, c.path('/actions/grant-add'), {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    });
    expect(noOrigin.status).toBe(403);
    const noCsrf = await c.post(cookie, '/actions/grant-add', { ...fields, csrf: 'x' });
    expect(noCsrf.status).toBe(403);
    expect(await granted()).toBe(0);

    const done = await c.post(cookie, '/actions/grant-add', fields);
    expect(done.status).toBe(200);
    expect(done.body).toContain('Grant added');
    expect(ok(await admin().call('grants.list', { agentId: a.agent.id })).grants).toEqual([
      expect.objectContaining({ peerAgentId: b.agent.id }),
    ]);
  });

  it('sends a strict CSP and serves no inline script or style', async () => {
    const r = await http(c.port, c.path('/'), { headers: { cookie } });
    const csp = String(r.headers['content-security-policy']);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toContain("frame-ancestors 'none'");
    // The pages' <base href> names the console's own prefix; no other base is allowed.
    expect(csp).toContain("base-uri 'self'");
    expect(r.body).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>/);
    expect(r.body).not.toMatch(/\son[a-z]+=/i);
    expect(r.body).not.toMatch(/<style|style=/);
    const js = await http(c.port, c.path('/assets/console.js'));
    expect(js.status).toBe(200);
    expect(js.headers['content-type']).toContain('text/javascript');
    expect(js.body).not.toContain('innerHTML');
  });

  it('renders daemon-provided text escaped: an agent named like markup stays text', async () => {
    ok(await admin().call('agents.create', { username: 'markup', name: '<img src=x onerror=alert(1)>"\'&' }));
    const r = await http(c.port, c.path('/'), { headers: { cookie } });
    expect(r.body).toContain('&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;');
    expect(r.body).not.toContain('<img');
  });

  it('listens on loopback only unless --allow-remote is given', async () => {
    const r = expectExit(await cli().run(['console', '--listen', '0.0.0.0:0']), 2);
    expect(r.stderr).toContain('not a loopback address');
    expectExit(await cli().run(['console', '--listen', 'nonsense']), 2);
  });

  it('signs out: the session stops at once, the cookie is cleared, and a new sign-in URL is printed', async () => {
    const csrf = await c.csrfOf(cookie);
    expect((await http(c.port, c.path('/'), { headers: { cookie } })).body).toContain('action="logout"');
    const cross = await c.post(cookie, '/logout', { csrf }, { origin: 'http://evil.example' });
    expect(cross.status).toBe(403);
    const out = await c.post(cookie, '/logout', { csrf });
    expect(out.status).toBe(200);
    expect(String(out.headers['set-cookie'])).toBe(`yello_console=; HttpOnly; SameSite=Strict; Path=${c.prefix}; Max-Age=0`);
    expect((await http(c.port, c.path('/'), { headers: { cookie } })).status).toBe(401);
    const [, next] = await c.run.waitForLines(2, 10_000);
    expect(next).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${c.port}${c.prefix}login\\?secret=[A-Za-z0-9_-]{43}$`));
    const again = await http(c.port, new URL(next!).pathname + new URL(next!).search);
    expect(again.status).toBe(303);
    cookie = String(again.headers['set-cookie']).split(';')[0]!;
    expect((await http(c.port, c.path('/'), { headers: { cookie } })).status).toBe(200);
  });
});

describe('a console no local user can lock out', () => {
  it('signs the owner in with the right secret after many wrong ones', async () => {
    const d = await startConsole(cli(), track);
    for (let i = 0; i < 30; i++) {
      const r = await http(d.port, d.path(`/login?secret=wrong-${i}`));
      expect(r.status).toBe(i < 10 ? 403 : 429);
    }
    const u = new URL(d.url);
    expect((await http(d.port, u.pathname + u.search)).status).toBe(303);
  });
});

describe('--allow-remote on a wildcard address', () => {
  it('prints a URL naming an address of this host (never 0.0.0.0) that a request naming it can use', async () => {
    const d = await startConsole(cli(), track, ['--listen', '0.0.0.0:0', '--allow-remote']);
    const u = new URL(d.url);
    expect(u.hostname).not.toBe('0.0.0.0');
    const named = { host: u.host };
    const r = await http(d.port, u.pathname + u.search, { headers: named });
    expect(r.status).toBe(303);
    const cookie = String(r.headers['set-cookie']).split(';')[0]!;
    expect((await http(d.port, d.path('/'), { headers: { ...named, cookie } })).status).toBe(200);
    expect((await http(d.port, d.path('/'), { headers: { host: `0.0.0.0:${d.port}`, cookie } })).status).toBe(421);
  });
});
