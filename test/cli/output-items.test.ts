// The small output items of issue 23 (finding 7), tried as a user would against a real daemon:
// `grants list` names agents by username, `chats history --all-generations` shows a chat's whole
// conversation across resets, an error says its reason once, and a socket refused for its group
// says which group to join.

import { describe, expect, it, vi } from 'vitest';
import { expectExit } from '../helpers/cli-runner.js';
import { useCli } from '../helpers/use-daemon.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const { cli, namedAgents } = useCli();
const named = namedAgents;

describe('grants list', () => {
  it('names both agents by username; the ids stay in --json', async () => {
    const { alice, aliceId, bobId } = await named();
    const admin = expectExit(await cli().run(['grants', 'list']), 0);
    expect(admin.stdout).toMatch(/^AGENT\s+PEER\s+GRANTED\s*$/m);
    expect(admin.stdout).toMatch(/^alice\s+bob\s+\d{4}-\d\d-\d\dT/m);
    expect(admin.stdout).toMatch(/^bob\s+alice\s+\d{4}-\d\d-\d\dT/m);
    expect(admin.stdout).not.toMatch(/agt_/);

    // An agent sees its own grants the same way.
    const own = expectExit(await alice.run(['grants', 'list']), 0);
    expect(own.stdout.trim().split('\n').slice(1)).toEqual([expect.stringMatching(/^alice\s+bob\s+\d{4}-/)]);

    const json = await cli().json<{ grants: Array<Record<string, unknown>> }>(['grants', 'list', 'alice']);
    expect(json.grants.map((g) => [g.agentId, g.peerAgentId, typeof g.grantedAt])).toEqual([[aliceId, bobId, 'string']]);
  });
});
