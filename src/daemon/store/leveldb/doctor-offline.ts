import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import type { DoctorReport } from '../../../shared/types.js';
import { checkStore } from './doctor.js';
import { Integrity } from '../integrity.js';
import { levelMarkStore } from './level-store.js';
import { applyRecoveryReport } from './recovery-check.js';
import { Signer } from '../../crypto/signer.js';
import { openStore } from './store-open.js';

/**
 * `yello doctor` on a store no daemon holds: open it exactly as the daemon would (so what
 * LevelDB reports about its log is acted on and stored, not lost with the next open), run the
 * full check, close. Throws the LevelDB error (LEVEL_LOCKED when a daemon holds it).
 */
export async function runDoctorOffline(dataDir: string, options: { mark?: boolean } = {}): Promise<DoctorReport> {
  if (!existsSync(join(dataDir, 'db'))) throw Object.assign(new Error(`no store at ${join(dataDir, 'db')}`), { code: 'ENOENT' });
  // Diagnostics go to stderr: stdout is the report.
  const log = pino({ level: 'warn', base: { service: 'yello-doctor' } }, pino.destination(2));
  const store = await openStore(dataDir, log);
  try {
    const integrity = new Integrity(levelMarkStore(store.storage), log);
    await integrity.load();
    await applyRecoveryReport(store, integrity, log);
    return await checkStore(store.storage, integrity, new Signer(join(dataDir, 'keys')), options);
  } finally {
    await store.storage.close();
  }
}
