// The daemon's permanent exit codes and yellod.service's RestartPreventExitStatus= are one list in
// two places: this fails when either changes alone. YELLO_SYSTEMD_DIR points at another systemd/.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXIT_CODES, PERMANENT_EXIT_CODES } from '../../src/daemon/runtime/exit-codes.js';

const unitDir = process.env.YELLO_SYSTEMD_DIR
  ? path.resolve(process.env.YELLO_SYSTEMD_DIR)
  : path.resolve(import.meta.dirname, '../../systemd');
const service = readFileSync(path.join(unitDir, 'yellod.service'), 'utf8');
const readme = readFileSync(path.join(unitDir, 'README.md'), 'utf8');

/** RestartPreventExitStatus= as systemd reads it: lines accumulate, an empty one resets. */
function restartPreventExitStatus(unit: string): number[] {
  let codes: number[] = [];
  for (const line of unit.split('\n')) {
    const m = /^\s*RestartPreventExitStatus=(.*)$/.exec(line);
    if (!m) continue;
    const words = m[1]!.trim().split(/\s+/).filter(Boolean);
    codes = words.length === 0 ? [] : [...codes, ...words.map((w) => Number(w))];
  }
  return codes;
}

describe('systemd RestartPreventExitStatus', () => {
  it('lists exactly PERMANENT_EXIT_CODES', () => {
    const listed = restartPreventExitStatus(service);
    expect(listed.every((c) => Number.isInteger(c))).toBe(true);
    expect([...listed].sort((a, b) => a - b)).toEqual([...PERMANENT_EXIT_CODES].sort((a, b) => a - b));
  });

  it('never lists a code that restarting can fix, and 0 is no failure', () => {
    const listed = new Set(restartPreventExitStatus(service));
    expect(listed.has(EXIT_CODES.internal)).toBe(false);
    expect(listed.has(EXIT_CODES.ok)).toBe(false);
  });

  it('explains every listed code in a comment of the unit and in systemd/README.md', () => {
    for (const code of PERMANENT_EXIT_CODES) {
      expect(service, `comment for ${code} in yellod.service`).toMatch(new RegExp(`^#\\s+${code}\\s+\\S`, 'm'));
      expect(readme, `row for ${code} in systemd/README.md`).toMatch(new RegExp(`^\\| ${code} \\|`, 'm'));
    }
  });
});
