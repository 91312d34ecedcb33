// Cursor stores (what a Coordinator resumes from): MemoryCursorStore, and FileCursorStore's
// one JSON file, private, replaced atomically, readable by a later process.

import { mkdir, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileCursorStore, MemoryCursorStore } from '../../src/client/index.js';
import { makeTempDir } from '../helpers/client-fixtures.js';

let dir = '';
beforeAll(async () => {
  dir = await makeTempDir('ylcs-');
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('MemoryCursorStore', () => {
  it('loads null until saved, then the latest cursor per chat', async () => {
    const s = new MemoryCursorStore();
    expect(await s.load('chat_a')).toBeNull();
    await s.save('chat_a', 'c1');
    await s.save('chat_b', 'x1');
    await s.save('chat_a', 'c2');
    expect(await s.load('chat_a')).toBe('c2');
    expect(await s.load('chat_b')).toBe('x1');
  });
});

describe('FileCursorStore', () => {
  it('persists cursors per chat in a private file that a new instance reads back', async () => {
    const file = path.join(dir, 'nested', 'cursors.json');
    const s = new FileCursorStore(file);
    expect(await s.load('chat_a')).toBeNull();
    await Promise.all([s.save('chat_a', 'c1'), s.save('chat_b', 'x1'), s.save('chat_a', 'c2')]);
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ chat_a: 'c2', chat_b: 'x1' });
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(await readdir(path.dirname(file))).toEqual(['cursors.json']); // no temp file left behind

    const again = new FileCursorStore(file);
    expect(await again.load('chat_a')).toBe('c2');
    expect(await again.load('chat_b')).toBe('x1');
  });

  it('fails loudly on a corrupt file instead of starting over', async () => {
    const file = path.join(dir, 'corrupt.json');
    await writeFile(file, '{"chat_a": "c1"'); // torn
    await expect(new FileCursorStore(file).load('chat_a')).rejects.toThrow();
  });

  it('a failed save does not make every later save fail', async () => {
    const parent = path.join(dir, 'blocked');
    await writeFile(parent, 'a file where the directory should be');
    const s = new FileCursorStore(path.join(parent, 'cursors.json'));
    await expect(s.save('chat_a', 'c1')).rejects.toThrow();

    // The obstacle goes away; the next save must work.
    await rm(parent);
    await mkdir(parent);
    await expect(s.save('chat_a', 'c2')).resolves.toBeUndefined();
    expect(await new FileCursorStore(path.join(parent, 'cursors.json')).load('chat_a')).toBe('c2');
  });
});
