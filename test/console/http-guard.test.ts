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

  it('prints a loopback URL with a one-time secret; the exchange sets an HttpOnly SameSite=Strict cookie', async () => {
    c = await startConsole(cli(), track);
    expect(c.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/login\?secret=[A-Za-z0-9_-]{43}$/);
    const u = new URL(c.url);
    const r = await http(c.port, u.pathname + u.search);
    expect(r.status).toBe(303);
    expect(r.headers.location).toBe('/');
    const set = String(r.headers['set-cookie']);
    expect(set).toMatch(/^yello_console=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/$/);
    cookie = set.split(';')[0]!;
    const page = await http(c.port, '/', { headers: { cookie } });
    expect(page.status).toBe(200);
    expect(page.body).toContain('Needs a person');
  });

  it('refuses the secret a second time, and a wrong one', async () => {
    const u = new URL(c.url);
    const again = await http(c.port, u.pathname + u.search);
    expect(again.status).toBe(403);
    expect(again.headers['set-cookie']).toBeUndefined();
    expect(again.body).toContain('works once');
    const wrong = await http(c.port, '/login?secret=nope');
    expect(wrong.status).toBe(403);
  });

  it('refuses a request without the cookie, or with a made-up one', async () => {
    for (const headers of [{}, { cookie: 'yello_console=made-up' }] as Record<string, string>[]) {
      const r = await http(c.port, '/', { headers });
      expect(r.status).toBe(401);
      expect(r.body).toContain('open the URL that yello console printed');
      expect(r.body).not.toContain('Needs a person');
    }
    const post = await http(c.port, '/actions/grant-add', {
      method: 'POST',
      headers: { origin: c.origin, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'agent=a&peer=b',
    });
    expect(post.status).toBe(401);
  });

  it('refuses a wrong Host (DNS rebinding), even with the session cookie', async () => {
    for (const host of ['evil.example', `evil.example:${c.port}`, `127.0.0.1:${c.port + 1}`]) {
      const r = await http(c.port, '/', { headers: { host, cookie } });
      expect(r.status, host).toBe(421);
      expect(r.body).not.toContain('Needs a person');
    }
    expect((await http(c.port, '/', { headers: { host: `localhost:${c.port}`, cookie } })).status).toBe(200);
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
    const noOrigin = await http(c.port, '/actions/grant-add', {
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
    const r = await http(c.port, '/', { headers: { cookie } });
    const csp = String(r.headers['content-security-policy']);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toContain("frame-ancestors 'none'");
    expect(r.body).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>/);
    expect(r.body).not.toMatch(/\son[a-z]+=/i);
    expect(r.body).not.toMatch(/<style|style=/);
    const js = await http(c.port, '/assets/console.js');
    expect(js.status).toBe(200);
    expect(js.headers['content-type']).toContain('text/javascript');
    expect(js.body).not.toContain('innerHTML');
  });

  it('renders daemon-provided text escaped: an agent named like markup stays text', async () => {
    ok(await admin().call('agents.create', { username: 'markup', name: '<img src=x onerror=alert(1)>"\'&' }));
    const r = await http(c.port, '/', { headers: { cookie } });
    expect(r.body).toContain('&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;');
    expect(r.body).not.toContain('<img');
  });

  it('listens on loopback only unless --allow-remote is given', async () => {
    const r = expectExit(await cli().run(['console', '--listen', '0.0.0.0:0']), 2);
    expect(r.stderr).toContain('not a loopback address');
    expectExit(await cli().run(['console', '--listen', 'nonsense']), 2);
  });
});
