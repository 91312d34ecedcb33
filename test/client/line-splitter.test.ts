// The client's NDJSON framing (src/client/line-splitter.ts): lines come out whole and in
// order whatever the chunking, UTF-8 split across chunks survives, every byte is scanned for
// a newline exactly once (so a huge line costs time linear in its size, where the old
// growing-string reader rescanned from the start on every chunk), and a line over the cap
// stops the splitter.

import { describe, expect, it } from 'vitest';
import { LineOverflow, LineSplitter } from '../../src/client/line-splitter.js';

function splitAll(input: Buffer, chunkSize: number, max = 1 << 30): { lines: string[]; splitter: LineSplitter } {
  const lines: string[] = [];
  const splitter = new LineSplitter(max, (l) => lines.push(l));
  for (let i = 0; i < input.length; i += chunkSize) splitter.push(input.subarray(i, i + chunkSize));
  return { lines, splitter };
}

describe('LineSplitter', () => {
  it('yields the same lines for every chunking, skipping empty lines', () => {
    const text = '{"a":1}\n\n{"b":"two"}\n{"c":[3]}\n';
    for (const size of [1, 2, 3, 5, 7, 64]) {
      expect(splitAll(Buffer.from(text), size).lines, `chunks of ${size}`).toEqual(['{"a":1}', '{"b":"two"}', '{"c":[3]}']);
    }
  });

  it('keeps a line without its newline until the newline arrives', () => {
    const { lines, splitter } = splitAll(Buffer.from('{"a":1}\n{"b":'), 4);
    expect(lines).toEqual(['{"a":1}']);
    expect(splitter.bufferedBytes).toBe(5);
    splitter.push(Buffer.from('2}\n'));
    expect(lines).toEqual(['{"a":1}', '{"b":2}']);
    expect(splitter.bufferedBytes).toBe(0);
  });

  it('decodes multi-byte UTF-8 split across chunks intact', () => {
    const text = '"é€😀 ü"\n"日本語"\n';
    const bytes = Buffer.from(text, 'utf8');
    for (let size = 1; size <= 6; size++) expect(splitAll(bytes, size).lines).toEqual(['"é€😀 ü"', '"日本語"']);
  });

  it('scans each byte once: a 24 MiB line in 1 KiB chunks costs 24 MiB of scanning, not its square', () => {
    const line = Buffer.alloc(24 * 1024 * 1024, 0x61);
    const input = Buffer.concat([line, Buffer.from('\n{"after":true}\n')]);
    const { lines, splitter } = splitAll(input, 1024);
    expect(lines.length).toBe(2);
    expect(lines[0]!.length).toBe(line.length);
    expect(lines[1]).toBe('{"after":true}');
    expect(splitter.scannedBytes).toBe(input.length);
  });

  it('scanning work equals the input size for many lines in odd chunks', () => {
    const input = Buffer.from(Array.from({ length: 5000 }, (_, i) => JSON.stringify({ i, pad: 'x'.repeat(i % 97) })).join('\n') + '\n');
    for (const size of [1, 13, 4096]) {
      const { lines, splitter } = splitAll(input, size);
      expect(lines.length).toBe(5000);
      expect(splitter.scannedBytes).toBe(input.length);
    }
  });

  it('throws LineOverflow once a line passes the cap, after delivering the lines before it', () => {
    const lines: string[] = [];
    const splitter = new LineSplitter(10, (l) => lines.push(l));
    splitter.push(Buffer.from('0123456789\n'));
    expect(lines).toEqual(['0123456789']);
    let thrown: unknown;
    try {
      splitter.push(Buffer.from('ok\n0123456'));
      splitter.push(Buffer.from('789A'));
    } catch (err) {
      thrown = err;
    }
    expect(lines).toEqual(['0123456789', 'ok']);
    expect(thrown).toBeInstanceOf(LineOverflow);
    expect((thrown as LineOverflow).limit).toBe(10);
    expect((thrown as LineOverflow).size).toBe(11);
    // Nothing of the over-size line is kept.
    expect(splitter.bufferedBytes).toBe(0);
  });
});
