// The console in a real browser (headless Chromium): the overview lists a chat; a message sent
// with the CLI shows live within a second, its signature verified in the page; a tampered
// export record shows as unverified; a reset asks for a typed confirmation and then shows a
// break banner; a wrong Host, a missing cookie and a cross-origin POST are refused. The
// screenshots it takes are the ones docs/console.md shows.

import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useCli, type NamedAgents } from '../helpers/use-daemon.js';
import { ok } from '../helpers/wire-fixtures.js';
import { screenshot, useBrowser } from './browser-fixture.js';
import { startConsole, type ConsoleProcess } from './console-fixture.js';

const { cli, track, admin, daemon, namedAgents } = useCli();
const browser = useBrowser();

let c: ConsoleProcess;
let agents: NamedAgents;
let chatId: string;
let context: BrowserContext | undefined;
let page: Page;

beforeAll(async () => {
  agents = await namedAgents();
  chatId = (await agents.alice.ok(['chats', 'open', 'bob'])).stdout.trim();
  await agents.alice.ok(['send', chatId, 'hello, bob: the build is green']);
  await agents.bob.ok(['chats', 'read', chatId, '--ack']);
  await agents.bob.ok(['send', chatId, 'thanks, alice <b>not bold</b>']);
  c = await startConsole(cli(), track);
  const ctx = await browser().newContext({ viewport: { width: 1200, height: 900 } });
  context = ctx;
  // Fail an action that cannot happen within 10 s instead of waiting forever (the library's default).
  ctx.setDefaultTimeout(10_000);
  page = await ctx.newPage();
  await page.goto(c.url);
}, 90_000);

afterAll(async () => {
  await context?.close();
});

describe('the console in a browser', () => {
  it('signs in with the printed URL and the overview lists the chat, its agents and the daemon', async () => {
    expect(new URL(page.url()).pathname).toBe(c.prefix);
    await expect.poll(() => page.getByRole('heading', { name: 'Needs a person' }).isVisible()).toBe(true);
    const row = page.getByRole('row', { name: new RegExp(chatId) });
    await expect.poll(() => row.textContent()).toMatch(/alice ↔ bob|bob ↔ alice/);
    expect(await page.getByRole('row', { name: /alice/ }).first().isVisible()).toBe(true);
    expect(await page.locator('dd', { hasText: 'writable' }).isVisible()).toBe(true);
    // The cookie is not readable by the page's scripts.
    expect(await page.evaluate('document.cookie')).toBe('');
    await page.screenshot({ path: screenshot('overview'), fullPage: true });
    // Keyboard: the first Tab reaches the skip link.
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.textContent')).toBe('Skip to content');
  });

  it('shows the whole chat with verified signatures and read marks, and a message sent by the CLI within a second', async () => {
    await page.goto(c.origin + c.path(`/chats/${chatId}`));
    const transcript = page.getByRole('list', { name: 'Conversation' });
    await expect.poll(() => page.getByRole('status').textContent(), { timeout: 15_000 }).toMatch(/2 messages, 2 signatures verified.*live/);
    expect(await transcript.getByText('✓ bob read up to here').count()).toBe(1);
    // Content is text: the markup in bob's message is shown, not rendered.
    expect(await transcript.getByText('thanks, alice <b>not bold</b>').isVisible()).toBe(true);
    expect(await transcript.locator('b').count()).toBe(0);

    await agents.alice.ok(['send', chatId, 'a live one']);
    const sent = Date.now();
    await transcript.getByText('a live one').waitFor({ timeout: 5_000 });
    const shownAfterMs = Date.now() - sent;
    expect(shownAfterMs).toBeLessThan(1_000);
    await expect.poll(() => page.getByRole('status').textContent()).toMatch(/3 messages, 3 signatures verified/);
    await page.screenshot({ path: screenshot('chat'), fullPage: true });
  });

  it('searches within the chat', async () => {
    await page.getByLabel('Search this chat').fill('GREEN');
    await expect.poll(() => page.getByRole('status').textContent()).toMatch(/^1 matching messages/);
    expect(await page.getByRole('list', { name: 'Conversation' }).getByRole('article').count()).toBe(1);
    await page.getByLabel('Search this chat').fill('');
  });

  it('shows a tampered export record as unverified, and the others as verified', async () => {
    const exported = await cli().ok(['chats', 'export', chatId]);
    const lines = exported.stdout.trim().split('\n');
    const i = lines.findIndex((l) => l.includes('hello, bob'));
    lines[i] = lines[i]!.replace('the build is green', 'the build is red');
    const file = path.join(daemon().dir, 'tampered.jsonl');
    writeFileSync(file, lines.join('\n') + '\n');
    await page.goto(c.origin + c.path(`/verify`));
    await page.getByLabel('Export file').setInputFiles(file);
    const list = page.getByRole('list', { name: 'Exported records' });
    await expect
      .poll(() => page.getByRole('status').textContent())
      .toMatch(/3 messages, 2 signatures verified in this browser, 1 UNVERIFIED/);
    const bad = list.getByRole('article').filter({ hasText: 'the build is red' });
    expect(await bad.textContent()).toContain('✗ UNVERIFIED: the content does not match its signed hash');
    expect(await list.getByRole('article').filter({ hasText: 'a live one' }).textContent()).toContain('✓ signature verified');
    await page.screenshot({ path: screenshot('verify-tampered'), fullPage: true });
  });

  it('shows the receipts and writer fences of a handed-in export as unsigned claims, never as facts', async () => {
    const exported = await cli().ok(['chats', 'export', chatId]);
    const records = exported.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const hello = records.find((r) => JSON.stringify(r).includes('hello, bob')) as {
      streamId: string;
      generation: string;
      position: string;
    };
    const bobStream = `${chatId}:${agents.bobId}`;
    const forged = [
      {
        streamId: bobStream,
        generation: '1',
        position: '90',
        wrapper: {
          type: 'chat.writer-fence',
          chatId,
          authorAgentId: agents.bobId,
          fence: { epoch: '99', claimedAt: '2026-01-01T00:00:00.000Z', replaced: false, reason: 'ADMIN VERIFIED' },
        },
      },
      {
        streamId: bobStream,
        generation: '1',
        position: '91',
        wrapper: {
          type: 'chat.receipt',
          chatId,
          authorAgentId: agents.bobId,
          receipt: {
            peerStreamId: hello.streamId,
            peerGeneration: hello.generation,
            nextPosition: String(Number(hello.position) + 1),
            batchId: 'x',
          },
        },
      },
    ];
    const file = path.join(daemon().dir, 'forged.jsonl');
    writeFileSync(file, [...records, ...forged].map((r) => JSON.stringify(r)).join('\n') + '\n');
    await page.goto(c.origin + c.path('/verify'));
    await page.getByLabel('Export file').setInputFiles(file);
    await expect
      .poll(() => page.getByRole('status').textContent())
      .toMatch(/receipts and writer fences UNSIGNED \(not verifiable here: run yello verify\)/);
    const list = page.getByRole('list', { name: 'Exported records' });
    const text = (await list.textContent()) ?? '';
    expect(text).not.toMatch(/✓ \w+ read up to here/);
    // The verify page knows no usernames: the file names agents by id.
    expect(text).toContain(`an unsigned receipt says ${agents.bobId} read up to here`);
    const fence = list.locator('li', { hasText: 'ADMIN VERIFIED' });
    expect(await fence.getAttribute('class')).toContain('unverified');
    expect(await fence.textContent()).toContain('UNSIGNED, not verifiable here');
    expect(await fence.textContent()).toContain('(reason given: "ADMIN VERIFIED")');
  });

  it('asks for a typed confirmation before a reset, then shows the break as a banner and a seam', async () => {
    const streamId = `${chatId}:${agents.aliceId}`;
    await page.goto(c.origin + c.path(`/chats/${chatId}`));
    const stream = page.locator(`[data-stream="${streamId}"]`);
    await stream.getByText('Interventions on this stream').click();
    const form = stream.locator('form[action="actions/reset"]');
    expect(await form.textContent()).toContain(`CLI: yello streams reset ${streamId}`);
    await form.getByLabel('Reason').fill('demo of a reset');
    // Without the confirmation the browser does not send the form.
    await form.getByRole('button', { name: 'Reset the stream' }).click();
    expect(new URL(page.url()).pathname).toBe(c.path(`/chats/${chatId}`));
    expect(
      await form
        .getByLabel(/Type reset to confirm/)
        .evaluate((e) => (e as unknown as { validity: { valueMissing: boolean } }).validity.valueMissing),
    ).toBe(true);
    // A wrong word is refused by the console.
    await form.getByLabel(/Type reset to confirm/).fill('yes');
    await form.getByRole('button', { name: 'Reset the stream' }).click();
    await page.getByRole('heading', { name: 'Not done' }).waitFor();
    expect(await page.getByRole('alert').textContent()).toContain('type "reset"');
    expect(ok(await admin().call('streams.get', { streamId })).generation).toBe('1');

    await page.goto(c.origin + c.path(`/chats/${chatId}`));
    await stream.getByText('Interventions on this stream').click();
    await form.getByLabel('Reason').fill('demo of a reset');
    await form.getByLabel(/Type reset to confirm/).fill('reset');
    await form.getByRole('button', { name: 'Reset the stream' }).click();
    await page.getByRole('heading', { name: 'Stream reset' }).waitFor();
    expect(ok(await admin().call('streams.get', { streamId })).generation).toBe('2');

    await agents.alice.ok(['send', chatId, 'after the reset']);
    await page.getByRole('link', { name: 'Back' }).click();
    const banner = page.getByRole('alert').filter({ hasText: "Continuity break: alice's stream was reset" });
    await banner.waitFor({ timeout: 15_000 });
    expect(await banner.textContent()).toContain(`yello chats read ${chatId} --from generation-start --ack`);
    const transcript = page.getByRole('list', { name: 'Conversation' });
    await transcript.getByText('after the reset').waitFor({ timeout: 15_000 });
    expect(await transcript.getByText("alice's stream was reset: generation 2 starts here").isVisible()).toBe(true);
    await page.screenshot({ path: screenshot('reset-banner'), fullPage: true });
  }, 90_000);

  it('never sends the session cookie to another server on 127.0.0.1 (cookies ignore ports; the path scopes it)', async () => {
    const seen: string[] = [];
    const other: Server = createServer((req, res) => {
      if (req.url !== '/favicon.ico') seen.push(`${req.url} ${req.headers.cookie ?? '(no cookie)'}`);
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end("<p>another local user's server</p>");
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    try {
      const port = (other.address() as AddressInfo).port;
      expect((await context!.cookies(c.origin + c.prefix)).map((k) => k.name)).toContain('yello_console');
      for (const p of ['/', '/chats/x', '/login']) await page.goto(`http://127.0.0.1:${port}${p}`);
      expect(seen).toHaveLength(3);
      for (const line of seen) expect(line).not.toContain('yello_console');
    } finally {
      other.close();
    }
  });

  it('refuses a wrong Host, a browser without the cookie, and a cross-origin form post', async () => {
    const rebound = await page.goto(`http://evil.test:${c.port}/`);
    expect(rebound?.status()).toBe(421);
    expect(await page.textContent('body')).toContain('answers only to the address it printed');

    const stranger = await browser().newContext();
    try {
      const p = await stranger.newPage();
      const r = await p.goto(c.origin + c.path(`/`));
      expect(r?.status()).toBe(401);
      expect(await p.textContent('body')).toContain('open the URL that yello console printed');
    } finally {
      await stranger.close();
    }

    // Another site (another origin) that the signed-in browser visits posts a form to the console.
    const before = ok(await admin().call('grants.list', {})).grants.length;
    const evil: Server = createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end(
        `<form id="f" method="post" action="${c.origin}${c.path('/actions/grant-add')}"><input name="agent" value="bob"><input name="peer" value="alice"><input name="op" value="remove"></form><script>document.getElementById('f').submit()</script>`,
      );
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    try {
      const refused = page.waitForResponse((r) => r.url().startsWith(`${c.origin}${c.path('/actions/')}`));
      await page.goto(`http://evil.test:${(evil.address() as AddressInfo).port}/`);
      const r = await refused;
      expect([401, 403]).toContain(r.status());
    } finally {
      evil.close();
    }
    expect(ok(await admin().call('grants.list', {})).grants.length).toBe(before);
  });
});
