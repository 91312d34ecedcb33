// Pins src/shared/line-framing.ts, the one newline framing: the daemon's request reader, the
// client's answer reader (LineSplitter) and the MCP server's stdin (StdinLines) all step through
// it, so these rules hold for each of them.

import { describe, expect, it } from 'vitest';
import { LineFramer, type LineEvent } from '../../src/shared/line-framing.js';

const framer = (max = 1 << 20) => new LineFramer<Buffer>(max, (parts, bytes) => Buffer.concat(parts, bytes));
const text = (events: Array<LineEvent<Buffer>>) => events.map((e) => ('line' in e ? e.line.toString('utf8') : { tooLarge: e.tooLarge }));

describe('LineFramer', () => {
  it('gives whole lines in order, whatever the chunking, a character split across chunks intact', () => {
    const input = Buffer.from('één\n{"a":1}\n\nlast\n');
    for (let size = 1; size <= input.length; size++) {
      const f = framer();
      const events: Array<LineEvent<Buffer>> = [];
      for (let i = 0; i < input.length; i += size) {
        f.push(input.subarray(i, i + size));
        events.push(...f.drain());
      }
      expect(text(events), `chunks of ${size}`).toEqual(['één', '{"a":1}', 'last']);
      expect(f.scannedBytes).toBe(input.length);
    }
  });

  it('keeps an unfinished line until its newline comes', () => {
    const f = framer();
    f.push(Buffer.from('par'));
    expect([...f.drain()]).toEqual([]);
    expect(f.bufferedBytes).toBe(3);
    f.push(Buffer.from('tial\n'));
    expect(text([...f.drain()])).toEqual(['partial']);
    expect(f.bufferedBytes).toBe(0);
  });

  it('a line over the cap is reported once, as it passes the cap; the rest of it is dropped and the next line comes whole', () => {
    const f = framer(5);
    f.push(Buffer.from('ok\n0123'));
    f.push(Buffer.from('45'));
    f.push(Buffer.from('6789\nnext\n'));
    expect(text([...f.drain()])).toEqual(['ok', { tooLarge: 6 }, 'next']);
    expect(f.bufferedBytes).toBe(0);
  });

  it('a line of exactly the cap is a line', () => {
    const f = framer(5);
    f.push(Buffer.from('01234\n'));
    expect(text([...f.drain()])).toEqual(['01234']);
  });

  it('steps one newline (or one chunk end) at a time, so a caller can stop between any two', () => {
    const f = framer();
    f.push(Buffer.from('a\nb\nc'));
    expect(text([f.next()!])).toEqual(['a']);
    expect(f.pending).toBe(true);
    expect(text([f.next()!])).toEqual(['b']);
    expect(f.next()).toBeNull();
    expect(f.pending).toBe(false);
    f.push(Buffer.from('\n'));
    f.clear();
    expect(f.pending).toBe(false);
  });
});
