// `yello demo` against a fresh daemon (README quickstart), and the OpenRPC document that
// `rpc.discover` serves without a hello (what `--help`-style discovery on the wire relies on).

import { describe, expect, it, vi } from 'vitest';
import { expectExit } from '../helpers/cli-runner.js';
import { type Result } from '../helpers/wire-fixtures.js';
import { useCli } from '../helpers/use-daemon.js';
import { anyOf } from '../helpers/matchers.js';
import { CONTRACT_METHODS } from '../helpers/contract-methods.js';

vi.setConfig({ testTimeout: 90_000, hookTimeout: 60_000 });

const { daemon, cli } = useCli();

describe('yello demo', () => {
  it('against a fresh daemon: exit 0 and a transcript that is verified with 0 problems', async () => {
    const r = expectExit(await cli().run(['demo'], { timeoutMs: 60_000 }), 0);
    expect(r.stdout).toMatch(/chat chat_[a-z0-9]{26}/);
    expect(r.stdout).toMatch(/transcript/);
    expect(r.stdout).toMatch(/demo-alice → demo-bob .*Hi Bob/);
    expect(r.stdout).toMatch(/demo-bob → demo-alice .*Sure, Alice/);
    expect(r.stdout).toMatch(/acknowledged by demo-bob up to position \d+/);
    expect(r.stdout).toMatch(/verified/);
    expect(r.stdout).toMatch(/\b0 problems\b/);
    expect(r.stderr.trim()).toBe('');
    // It left real state behind: two agents and a chat.
    const st = await cli().json<Result<'daemon.status'>>(['status']);
    expect(st.counts).toMatchObject({ agents: 2, chats: 1 });
  });

  it('run again, it reuses its two agents and their chat, and shows only its own exchange', async () => {
    const again = expectExit(await cli().run(['demo'], { timeoutMs: 60_000 }), 0);
    expect(again.stderr).toContain('reusing the agents demo-alice and demo-bob of an earlier demo (new tokens)');
    expect(again.stdout.match(/Hi Bob/g)).toHaveLength(1);
    expect(again.stdout).toMatch(/\b0 problems\b/);
    const st = await cli().json<Result<'daemon.status'>>(['status']);
    expect(st.counts).toMatchObject({ agents: 2, chats: 1 });
  });
});

describe('rpc.discover', () => {
  it('answers without a hello with an OpenRPC document listing every method', async () => {
    const c = await daemon().connect();
    const resp = await c.call('rpc.discover', {});
    expect(resp.error).toBeUndefined();
    const doc = resp.result as {
      openrpc: string;
      info: unknown;
      methods: Array<{ name: string; params: unknown; result: unknown; summary?: string }>;
    };
    expect(doc.openrpc).toMatch(/^1\.\d+\.\d+$/);
    expect(doc.info).toMatchObject({ title: anyOf(String), version: anyOf(String) });
    const names: string[] = doc.methods.map((m) => m.name);
    for (const m of CONTRACT_METHODS) expect(names, m).toContain(m);
    expect(new Set(names).size).toBe(names.length);
    for (const m of doc.methods) {
      expect(Array.isArray(m.params), m.name).toBe(true);
      expect(m.result, m.name).toBeDefined();
    }
    // Still unauthenticated afterwards: discovery grants nothing.
    const status = await c.call('daemon.status', {});
    expect(status.error?.data?.type).toBe('UNAUTHENTICATED');
  });
});
