// The socket directory trust policy (src/shared/socket-trust.ts), as a pure function over
// stat-like facts: which directories a client may send a token into, and which the daemon
// may put its socket in. The filesystem versions of these cases are in
// test/client/socket-trust.test.ts and test/integration/socket-dir.test.ts.

import { describe, expect, it } from 'vitest';
import { ownedDirectoryProblem, socketDirectoryProblem, type StatLike } from '../../src/shared/socket-trust.js';

const dir = (uid: number, mode: number, extra: Partial<StatLike> = {}): StatLike => ({
  isDirectory: true,
  isSymbolicLink: false,
  uid,
  mode: 0o040000 | mode,
  ...extra,
});
const symlink = (uid: number): StatLike => ({ isDirectory: false, isSymbolicLink: true, uid, mode: 0o120777 });
const file = (uid: number): StatLike => ({ isDirectory: false, isSymbolicLink: false, uid, mode: 0o100644 });

const ME = 1000;
const OTHER = 1001;
const TMP = dir(0, 0o1777);

describe('socketDirectoryProblem (client)', () => {
  const trusted: Array<[string, StatLike, StatLike | null]> = [
    ['own 0700 dir in /tmp', dir(ME, 0o700), TMP],
    ['own 0750 dir', dir(ME, 0o750), TMP],
    ['root-owned 0755 dir in /tmp (root made it)', dir(0, 0o755), TMP],
    ['/run/yello owned by the daemon user under root-owned /run 0755', dir(OTHER, 0o750), dir(0, 0o755)],
    ['a dir of another uid under my own 0700 dir', dir(OTHER, 0o700), dir(ME, 0o700)],
    ['the root directory itself (no parent), root-owned', dir(0, 0o755), null],
  ];
  for (const [name, d, parent] of trusted) {
    it(`trusts ${name}`, () => {
      expect(socketDirectoryProblem(d, parent, ME)).toBeNull();
    });
  }

  const refused: Array<[string, StatLike, StatLike | null, RegExp]> = [
    [
      '/tmp/yello-$UID pre-created by another user',
      dir(OTHER, 0o700),
      TMP,
      /owned by uid 1001, not 1000 \(or 0\).*parent.*writable by group or others \(mode 01777\)/,
    ],
    ['a symlink, even to a good directory', symlink(ME), TMP, /symbolic link/],
    ['a symlink in a trusted parent', symlink(0), dir(0, 0o755), /symbolic link/],
    ['a regular file', file(ME), TMP, /not a directory/],
    ['an own dir that the group can write', dir(ME, 0o770), TMP, /writable by group or others \(mode 0770\)/],
    ['an own dir that anyone can write', dir(ME, 0o777), TMP, /writable by group or others \(mode 0777\)/],
    ['a sticky world-writable root dir', dir(0, 0o1777), dir(0, 0o755), /writable by group or others \(mode 01777\)/],
    ['a group-writable dir in a trusted parent', dir(OTHER, 0o770), dir(0, 0o755), /writable by group or others/],
    ['a foreign dir whose parent is a symlink', dir(OTHER, 0o700), symlink(0), /symbolic link/],
    ["a foreign dir whose parent is another user's", dir(OTHER, 0o700), dir(OTHER, 0o755), /owned by uid 1001/],
    ['a foreign dir whose parent the group can write', dir(OTHER, 0o700), dir(0, 0o775), /mode 0775/],
    ['a foreign dir with no parent', dir(OTHER, 0o755), null, /no parent/],
  ];
  for (const [name, d, parent, reason] of refused) {
    it(`refuses ${name}`, () => {
      expect(socketDirectoryProblem(d, parent, ME)).toMatch(reason);
    });
  }

  it('for root, only root-owned directories (or ones under them) are trusted', () => {
    expect(socketDirectoryProblem(dir(0, 0o700), TMP, 0)).toBeNull();
    expect(socketDirectoryProblem(dir(OTHER, 0o700), TMP, 0)).toBe(
      'owned by uid 1001, not 0, and its parent is not trusted either: writable by group or others (mode 01777)',
    );
  });
});

describe('ownedDirectoryProblem (daemon)', () => {
  it('accepts a real directory of its own uid or root, not group/other writable', () => {
    expect(ownedDirectoryProblem(dir(ME, 0o700), ME)).toBeNull();
    expect(ownedDirectoryProblem(dir(ME, 0o750), ME)).toBeNull();
    expect(ownedDirectoryProblem(dir(0, 0o755), ME)).toBeNull();
  });

  it('refuses another uid even under a trusted parent, a symlink, a file, and group or world write', () => {
    expect(ownedDirectoryProblem(dir(OTHER, 0o700), 0)).toBe('owned by uid 1001, not 0');
    expect(ownedDirectoryProblem(dir(OTHER, 0o700), ME)).toBe('owned by uid 1001, not 1000 (or 0)');
    expect(ownedDirectoryProblem(symlink(ME), ME)).toBe('it is a symbolic link');
    expect(ownedDirectoryProblem(file(ME), ME)).toBe('it is not a directory');
    expect(ownedDirectoryProblem(dir(ME, 0o720), ME)).toBe('writable by group or others (mode 0720)');
    expect(ownedDirectoryProblem(dir(ME, 0o702), ME)).toBe('writable by group or others (mode 0702)');
  });
});
