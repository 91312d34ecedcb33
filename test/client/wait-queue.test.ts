// Pins src/client/wait-queue.ts, the client's one way to wait: the Conversation, the Inbox, the
// PeerHead, the client's notification iterator, the MCP server's connection waits and the
// channel's and tmux pane's pauses (delay) all use it, so each rule here holds for all of them.

import { describe, expect, it } from 'vitest';
import { delay, WaitQueue, Waiters } from '../../src/client/wait-queue.js';

const tick = () => new Promise((r) => setTimeout(r, 5));

describe('Waiters', () => {
  it('wait() resolves at the next wake, not before', async () => {
    const w = new Waiters();
    let woke = false;
    const p = w.wait(10_000).then(() => (woke = true));
    await tick();
    expect(woke).toBe(false);
    w.wake();
    await p;
    expect(woke).toBe(true);
  });

  it('wait() resolves after its ms without a wake', async () => {
    const started = Date.now();
    await new Waiters().wait(30);
    expect(Date.now() - started).toBeGreaterThanOrEqual(25);
  });

  it('wait() rejects with the signal reason, at once when already aborted', async () => {
    const w = new Waiters();
    const stop = new AbortController();
    const p = w.wait(10_000, stop.signal);
    stop.abort(new Error('cancelled'));
    await expect(p).rejects.toThrow('cancelled');
    await expect(w.wait(10_000, stop.signal)).rejects.toThrow('cancelled');
  });

  it('until() looks at its condition at every wake, and says false at the deadline', async () => {
    const w = new Waiters();
    let n = 0;
    const p = w.until(() => n >= 2, 10_000);
    n = 1;
    w.wake();
    await tick();
    n = 2;
    w.wake();
    expect(await p).toBe(true);
    expect(await w.until(() => false, 20)).toBe(false);
  });
});

describe('WaitQueue', () => {
  it('hands items out in push order, to a taker that waits', async () => {
    const q = new WaitQueue<number>();
    const first = q.next();
    q.push(1);
    q.push(2);
    expect(await first).toBe(1);
    expect(await q.next({ waitMs: 0 })).toBe(2);
    expect(await q.next({ waitMs: 0 })).toBeNull();
  });

  it('after end(): what is queued, then null; pushes are dropped', async () => {
    const q = new WaitQueue<number>();
    q.push(1);
    q.end();
    q.push(2);
    expect(await q.next()).toBe(1);
    expect(await q.next()).toBeNull();
  });

  it('after fail(): what is queued, then the failure thrown; the first failure wins', async () => {
    const q = new WaitQueue<number>();
    q.push(1);
    q.fail(new Error('first'));
    q.fail(new Error('second'));
    expect(await q.next()).toBe(1);
    await expect(q.next()).rejects.toThrow('first');
    expect(q.failure?.message).toBe('first');
  });

  it('a waiting taker is woken by end() and by fail()', async () => {
    const ended = new WaitQueue<number>();
    const p = ended.next();
    ended.end();
    expect(await p).toBeNull();
    const failed = new WaitQueue<number>();
    const f = failed.next();
    failed.fail(new Error('broke'));
    await expect(f).rejects.toThrow('broke');
  });

  it('an aborted taker takes nothing: the item goes to the next one', async () => {
    const q = new WaitQueue<number>();
    const stop = new AbortController();
    const p = q.next({ signal: stop.signal });
    stop.abort(new Error('cancelled'));
    await expect(p).rejects.toThrow('cancelled');
    q.push(7);
    expect(await q.next({ waitMs: 0 })).toBe(7);
  });

  it('ready() never takes, resolves at once when an item is there, and after its ms otherwise', async () => {
    const q = new WaitQueue<number>();
    q.push(1);
    await q.ready(10_000);
    expect(q.length).toBe(1);
    q.shift();
    const started = Date.now();
    await q.ready(30);
    expect(Date.now() - started).toBeGreaterThanOrEqual(25);
  });

  it('last() is the newest item, to amend; clear() drops the rest', () => {
    const q = new WaitQueue<{ n: number }>();
    q.push({ n: 1 });
    q.push({ n: 2 });
    q.last()!.n = 3;
    expect(q.shift()?.n).toBe(1);
    expect(q.shift()?.n).toBe(3);
    q.push({ n: 4 });
    q.clear();
    expect(q.length).toBe(0);
  });
});

describe('delay', () => {
  it('pauses for its ms, and ends at once with the signal reason when aborted, even before it began', async () => {
    const started = Date.now();
    await delay(30);
    expect(Date.now() - started).toBeGreaterThanOrEqual(25);
    const stop = new AbortController();
    const p = delay(10_000, stop.signal);
    stop.abort(new Error('stopped'));
    await expect(p).rejects.toThrow('stopped');
    await expect(delay(10_000, stop.signal)).rejects.toThrow('stopped');
  });
});
