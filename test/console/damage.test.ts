// A damaged stream in the console: the overview lists the corruption mark first with the way
// out, the chat page says where reads stop and shows what lies below, and the console rides
// through the daemon restart it took to plant the damage.

import { beforeAll, describe, expect, it } from 'vitest';
import { damageStoredRecord } from '../helpers/store-tamper.js';
import { useCli } from '../helpers/use-daemon.js';
import { waitFor } from '../helpers/wait.js';
import { ok } from '../helpers/wire-fixtures.js';
import { http, startConsole, type ConsoleProcess } from './console-fixture.js';

const { cli, track, daemon, namedAgents, restart, admin } = useCli();

let c: ConsoleProcess;
let cookie: string;
let chatId: string;
let streamA: string;

beforeAll(async () => {
  const agents = await namedAgents();
  chatId = (await agents.alice.ok(['chats', 'open', 'bob'])).stdout.trim();
  streamA = `${chatId}:${agents.aliceId}`;
  for (const text of ['one', 'two', 'three', 'four']) await agents.alice.ok(['send', chatId, text]);
  c = await startConsole(cli(), track);
  cookie = await c.signIn();
  await daemon().stop();
  await damageStoredRecord(daemon().dataDir, streamA, 3); // position 3: the message "three"
  await restart();
  // Reading into the damage marks the stream (as any read would).
  await admin().call('streams.read', { streamId: streamA, generation: '1', fromPosition: '0', limit: 10 });
  await admin().call('streams.read', { streamId: streamA, generation: '1', fromPosition: '3' });
  expect(ok(await admin().call('daemon.status', {})).integrity.corruptStreams).toHaveLength(1);
}, 90_000);

describe('a damaged stream in the console', () => {
  it('is listed first under "Needs a person", with the steps out', async () => {
    // The console reconnects to the restarted daemon by itself.
    const body = await waitFor(
      async () => {
        const r = await http(c.port, c.path('/'), { headers: { cookie } });
        return r.status === 200 ? r.body : null;
      },
      'the overview after the restart',
      20_000,
    );
    expect(body).toContain('att-corrupt');
    expect(body).toContain(`${streamA} generation 1 is damaged from position 3`);
    expect(body).toContain(`yello streams reset ${streamA}`);
    expect(body).toMatch(/Corruption marks<\/dt>\s*<dd class="bad">1<\/dd>/);
    expect(body.indexOf('att-corrupt')).toBeLessThan(body.indexOf('Daemon</h2>'));
  });

  it('shows on the chat page where reads stop', async () => {
    const r = await http(c.port, c.path(`/chats/${chatId}`), { headers: { cookie } });
    expect(r.status).toBe(200);
    expect(r.body).toContain('DAMAGED from 3');
  });

  it('says what an export would miss, and exports what lies below the damage when asked', async () => {
    const refused = await http(c.port, c.path(`/chats/${chatId}/export.jsonl`), { headers: { cookie } });
    expect(refused.status).toBe(409);
    expect(refused.body).toContain(`${streamA} generation 1 is exported only below position 3`);
    expect(refused.body).toContain('?partial=1');
    const r = await http(c.port, c.path(`/chats/${chatId}/export.jsonl?partial=1`), { headers: { cookie } });
    expect(r.status).toBe(200);
    expect(r.headers['content-disposition']).toContain('.partial.jsonl');
    const contents = r.body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { wrapper?: { message?: { content: string } } })
      .flatMap((l) => (l.wrapper?.message ? [l.wrapper.message.content] : []));
    expect(contents).toEqual(['one', 'two']);
  });
});
