// Quota refusals in the overview: from the daemon's counters, only while they grow. A unit test of
// the window, and one over a real daemon whose claim quota refuses an agent.

import { describe, expect, it } from 'vitest';
import { useCli } from '../helpers/use-daemon.js';
import { http, startConsole } from './console-fixture.js';
import { QUOTA_WINDOW_MS, QuotaWatch, quotaCounts } from '../../src/console/quota-watch.js';

describe('QuotaWatch', () => {
  const scrape = (n: number) =>
    `# TYPE yello_quota_hits_total counter\nyello_quota_hits_total{quota="claimRate"} ${n}\nyello_quota_hits_total{quota="appendRate"} 0\n`;

  it('reads the counters of a scrape', () => {
    expect([...quotaCounts(scrape(3))]).toEqual([
      ['claimRate', 3],
      ['appendRate', 0],
    ]);
  });

  it('reports growth within the window, then nothing once it stops', () => {
    let now = 0;
    const w = new QuotaWatch(() => now);
    expect(w.add(quotaCounts(scrape(2)))).toEqual([{ quota: 'claimRate', count: 2, sinceStart: true }]);
    now += 60_000;
    expect(w.add(quotaCounts(scrape(5)))).toEqual([{ quota: 'claimRate', count: 5 - 2, sinceStart: false }]);
    now += QUOTA_WINDOW_MS + 1;
    w.add(quotaCounts(scrape(5)));
    now += QUOTA_WINDOW_MS + 1;
    expect(w.add(quotaCounts(scrape(5)))).toEqual([]);
  });

  it('takes a count below the earlier one as a restarted daemon', () => {
    let now = 0;
    const w = new QuotaWatch(() => now);
    w.add(quotaCounts(scrape(9)));
    now += 1000;
    expect(w.add(quotaCounts(scrape(1)))).toEqual([{ quota: 'claimRate', count: 1, sinceStart: true }]);
  });
});

describe('overview over a daemon whose claim quota refuses', () => {
  const { cli, track, namedAgents } = useCli({ extraArgs: ['--quota-claims-per-minute', '1'] });

  it('lists the refusing quota with what to do', async () => {
    const agents = await namedAgents();
    const chatId = (await agents.alice.ok(['chats', 'open', 'bob'])).stdout.trim();
    const c = await startConsole(cli(), track);
    const cookie = await c.signIn();
    const before = (await http(c.port, c.path('/'), { headers: { cookie } })).body;
    expect(before).not.toContain('att-quota');
    // Two claims in one minute: the second is RATE_LIMITED by the claimRate quota.
    await agents.alice.run(['streams', 'claim', `${chatId}:${agents.aliceId}`]);
    await agents.alice.run(['streams', 'claim', `${chatId}:${agents.aliceId}`, '--replace']);
    const after = (await http(c.port, c.path('/'), { headers: { cookie } })).body;
    expect(after).toContain('att-quota');
    expect(after).toMatch(/the claimRate quota refused 1 call in the last 10 minutes/);
    expect(after).toContain('--quota-claims-per-minute');
  }, 60_000);
});
