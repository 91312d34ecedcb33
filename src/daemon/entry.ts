/**
 * The one module through which the CLI reaches daemon code (the dependency rule: cli → mcp →
 * client → shared, daemon → shared, and the CLI into the daemon only here; checked by
 * test/client/import-graph.test.ts). The CLI imports it lazily, so commands other than
 * `yello daemon` and `yello doctor --offline` never load LevelDB or pino.
 */
export { startDaemon, type DaemonHost, type RunningDaemon } from './daemon.js';
export type { DaemonConfig } from './runtime/config.js';
export { StartupError } from './runtime/startup-error.js';
export { EXIT_CODES } from './runtime/exit-codes.js';
export { createLogger } from './runtime/log.js';
export { installProcessGuards } from './runtime/process-guards.js';
export { runDoctorOffline } from './store/leveldb/doctor-offline.js';
export { restoreBackup, RestoreError } from './store/leveldb/restore.js';
