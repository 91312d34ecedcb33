import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { VERSION } from '../../src/daemon/runtime/version.js';

describe('daemon version', () => {
  it('is the version package.json declares (one place to bump)', () => {
    const pkg = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../package.json'), 'utf8')) as { version: string };
    expect(VERSION).toBe(pkg.version);
  });
});
