// vitest globalSetup (vitest.config.ts): the spawned daemons and CLIs run dist/, so `npm test` on
// a fresh clone builds it first, and only when it is missing or older than src/ (after
// `npm run check`, which builds, this costs a walk over src/).

import { buildIfStale } from '../../scripts/stale-dist.mjs';

export function setup(): void {
  const status = buildIfStale();
  if (status !== 0) throw new Error(`npm run build failed (exit ${status}): the tests run the daemon and the CLI from dist/`);
}
