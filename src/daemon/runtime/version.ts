import { createRequire } from 'node:module';

/**
 * Daemon version reported by `session.hello` and `daemon.status`: package.json's, read once at
 * startup so there is one place to bump. The path holds from both `src/daemon/runtime` (tests) and
 * `dist/daemon/runtime` (the built daemon).
 */
export const VERSION: string = (createRequire(import.meta.url)('../../../package.json') as { version: string }).version;
