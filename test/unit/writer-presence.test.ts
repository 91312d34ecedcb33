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

  it('an inactive writer is never connected, even through an open connection that used its token', () => {
    // connected() promises "active and attached", not only "attached": a caller that asks it
    // alone (without checking meta.writer.active itself) must not see a released claim as live.
    const presence = new WriterPresence();
    const c = connection();
    const s = claimed('chat_5', 'h5');
    presence.attach(s.streamId, 'h5', c);
    expect(presence.connected(s)).toBe(true);
    expect(presence.connected({ ...s, writer: { ...s.writer, active: false } })).toBe(false);
    expect(presence.connected({ ...s, writer: { ...s.writer, active: false, tokenHash: null } })).toBe(false);
    expect(presence.connected({ ...s, writer: { ...s.writer, active: true, tokenHash: null } })).toBe(false);
  });

  it('a later claim on the stream is not connected through the connections of the claim it replaced', () => {
    const presence = new WriterPresence();
    const first = connection();
    const second = connection();
    const s = claimed('chat_6', 'h6');
    presence.attach(s.streamId, 'h6', first);
    presence.attach(s.streamId, 'h7', second);
    const replaced = { ...s, writer: { ...s.writer, epoch: 2, tokenHash: 'h7' } };
    expect([presence.connected(s), presence.connected(replaced)]).toEqual([false, true]);
    // The first connection hanging up does not detach the second claim's holder.
    first.hangUp();
    expect(presence.connected(replaced)).toBe(true);
    second.hangUp();
    expect(presence.connected(replaced)).toBe(false);
  });
});
