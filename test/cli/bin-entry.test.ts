// bin/yello runs the CLI's bundle (dist/cli/yello.js, scripts/bundle-cli.mjs) only while it is
// at least as new as what tsc emitted (dist/cli/main.js): a dist/ rewritten by tsc alone runs as
// emitted, so a stale bundle never answers in place of newer code. Checked on a copy of the real
// bin/yello beside stand-in entries that say which one ran, their times set explicitly.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/daemon-process.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'yello-bin-entry-'));
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

fs.mkdirSync(path.join(dir, 'bin'));
fs.mkdirSync(path.join(dir, 'dist/cli'), { recursive: true });
fs.copyFileSync(path.join(repoRoot, 'bin/yello'), path.join(dir, 'bin/yello'));
fs.writeFileSync(path.join(dir, 'package.json'), '{ "type": "module" }\n');
const main = path.join(dir, 'dist/cli/main.js');
const bundle = path.join(dir, 'dist/cli/yello.js');
fs.writeFileSync(main, "console.log('modules', process.argv.slice(2).join(' '));\n");

function writeBundle(): void {
  fs.writeFileSync(bundle, "console.log('bundle', process.argv.slice(2).join(' '));\n");
}

/** Which entry `node bin/yello` ran, with the arguments it saw. */
function ran(): string {
  const r = spawnSync(process.execPath, [path.join(dir, 'bin/yello'), 'status', '--json'], { encoding: 'utf8', timeout: 30_000 });
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  return r.stdout.trim();
}

function at(file: string, seconds: number): void {
  fs.utimesSync(file, seconds, seconds);
}

describe('bin/yello', () => {
  it('runs the modules tsc emitted while there is no bundle', () => {
    fs.rmSync(bundle, { force: true });
    expect(ran()).toBe('modules status --json');
  });

  it('runs the bundle when it is as new as main.js or newer', () => {
    writeBundle();
    at(main, 1_000_000);
    at(bundle, 1_000_000);
    expect(ran()).toBe('bundle status --json');
    at(bundle, 1_000_005);
    expect(ran()).toBe('bundle status --json');
  });

  it('runs the modules when tsc rewrote main.js after the bundle was made', () => {
    writeBundle();
    at(bundle, 1_000_000);
    at(main, 1_000_001);
    expect(ran()).toBe('modules status --json');
  });
});
