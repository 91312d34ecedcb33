// WriterPresence (src/daemon/streams/writer-presence.ts) in-process: what the socket tests cannot
// see. A connection is watched for its hang-up once, however many streams and appends it
// attaches to (a listener per append would grow with every message a coordinator sends), and
// its hang-up detaches it from every stream at once.

import { describe, expect, it } from 'vitest';
import { newStreamMeta, type StreamMeta } from '../../src/daemon/store/stream-meta.js';
import { WriterPresence, type Holder } from '../../src/daemon/streams/writer-presence.js';

/** A connection as presence sees it: it registers hang-up listeners, and the test hangs it up. */
function connection(): Holder & { listeners: number; hangUp(): void } {
  const fns: Array<() => void> = [];
  return {
    get listeners() {
      return fns.length;
    },
    onHangUp(fn: () => void) {
      fns.push(fn);
    },
    hangUp() {
      for (const fn of fns) fn();
    },
  };
}

function claimed(chat: string, tokenHash: string): StreamMeta {
  const meta = newStreamMeta(chat, 'agt_a', 'agt_b', '2026-12-04T00:00:00.000Z');
  meta.writer = { epoch: 1, claimedAt: '2026-12-04T00:00:00.000Z', active: true, tokenHash };
  return meta;
}

describe('WriterPresence', () => {
  it('watches a connection for its hang-up once, across many attaches and streams', () => {
    const presence = new WriterPresence();
    const c = connection();
    const s1 = claimed('chat_1', 'h1');
    const s2 = claimed('chat_2', 'h2');
    for (let i = 0; i < 5; i++) presence.attach(s1.streamId, 'h1', c);
    presence.attach(s2.streamId, 'h2', c);
    expect(c.listeners).toBe(1);
    expect([presence.connected(s1), presence.connected(s2)]).toEqual([true, true]);
    c.hangUp();
    expect([presence.connected(s1), presence.connected(s2)]).toEqual([false, false]);
  });

  it('a claim stays connected while any connection that used its token is open', () => {
    const presence = new WriterPresence();
    const claimer = connection();
    const appender = connection();
    const s = claimed('chat_3', 'h3');
    presence.attach(s.streamId, 'h3', claimer);
    presence.attach(s.streamId, 'h3', appender);
    appender.hangUp();
    expect(presence.connected(s)).toBe(true);
    claimer.hangUp();
    expect(presence.connected(s)).toBe(false);
    // A new claim's token is not connected through the old claim's connections.
    const other = connection();
    presence.attach(s.streamId, 'h3', other);
    expect(presence.connected({ ...s, writer: { ...s.writer, tokenHash: 'h4' } })).toBe(false);
  });
});
