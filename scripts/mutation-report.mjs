// What the mutation scripts read the same way from a Stryker JSON report (a run's
// reports/mutation/mutation.json): a score and a mutant's identity.

/** Statuses Stryker counts as detected, and those it counts at all (Ignored and errors are not). */
export const DETECTED = new Set(['Killed', 'Timeout']);
export const VALID = new Set(['Killed', 'Timeout', 'Survived', 'NoCoverage']);

/** Killed-or-timed-out and counted mutants among `mutants`. */
export function scoreOf(mutants) {
  let detected = 0;
  let valid = 0;
  for (const m of mutants) {
    if (DETECTED.has(m.status)) detected++;
    if (VALID.has(m.status)) valid++;
  }
  return { detected, valid };
}

/** A mutant as Stryker's incremental differ knows it within a file (1-based line and column). */
export const mutantKey = (m, line, column) => `${m.mutatorName}\n${m.replacement}\n${line}:${column}`;

/**
 * A mutant by its start and its end: two mutants can share mutator, replacement and start
 * (`true` for a whole `a || b` and for `a`), which Stryker's differ tells apart by the end.
 */
export const placedMutantKey = (m) =>
  `${mutantKey(m, m.location.start.line, m.location.start.column)}\n${m.location.end.line}:${m.location.end.column}`;
