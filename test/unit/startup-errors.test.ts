// How a failed start is classified (docs/protocol.md §2.7): corruption found while starting is
// exit 76 (a corrupt store, not restarted by systemd), never 75 (a failing filesystem). Seen in a
// bit-flip trial: a table-file flip surfaced at startup as a read that failed its check and the
// daemon exited 75.

import { describe, expect, it } from 'vitest';
import { errors } from '../../src/shared/errors.js';
import { startupFailure } from '../../src/daemon/runtime/startup-errors.js';

describe('startupFailure', () => {
  it('a value that failed the daemon’s own integrity check at startup is exit 76 (corrupt store)', () => {
    const err = errors.corrupt({ key: 'm/x', streamId: null, generation: null, fromPosition: null, detail: 'checksum mismatch' });
    const f = startupFailure(err, 'prepare the data dir /d');
    expect(f.exitCode).toBe(76);
    expect(f.message).toMatch(/corrupt/);
  });

  it('LevelDB corruption in an error’s text (a read, not the open) is exit 76', () => {
    const f = startupFailure(new Error('Corruption: block checksum mismatch: /d/db/000005.ldb'), 'open the store /d/db');
    expect(f.exitCode).toBe(76);
  });

  it('an I/O error is still exit 75, and LevelDB’s own corruption code 76', () => {
    expect(startupFailure(new Error('IO error: /d/db/LOG: Input/output error'), 'open the store').exitCode).toBe(75);
    expect(startupFailure(Object.assign(new Error('x'), { code: 'LEVEL_CORRUPTION' }), 'open the store').exitCode).toBe(76);
  });
});
