// The file-end check of the integration files: every error response this process has seen
// (`seenErrors`, recorded by every keeping wire client) is well-formed per §3 — never code 0,
// never a stack. It first provokes errors of its own, so it checks something even when it runs
// alone (`vitest run file -t 'error responses'`), and fails if nothing was recorded.

import { expect } from 'vitest';
import { errorShapeProblems, seenErrors } from './wire-fixtures.js';

/**
 * Runs `provoke` (which must make the daemon answer at least one error), then checks every
 * error seen so far: fails if `provoke` added none, or if any error has a §3 shape problem.
 */
export async function expectWellFormedErrors(provoke: () => Promise<unknown>): Promise<void> {
  const before = seenErrors.length;
  await provoke();
  expect(seenErrors.length, 'the provoking calls were answered without an error: the check would see nothing').toBeGreaterThan(before);
  for (const { method, error } of seenErrors) {
    expect(errorShapeProblems(error), `${method}: ${JSON.stringify(error)}`).toEqual([]);
  }
}
