import type { Checkpoint } from '../shared/types.js';
import { range, type Report, type Where } from './export-problems.js';
import type { Group } from './export-generation.js';

/**
 * The checkpoint stage of `verifyExport`: a stream generation's records are exactly the
 * positions its checkpoint covers (named where they are missing or extra), and they hash to its
 * chain digest. `at` is the checkpoint line's place.
 */
export function checkCheckpointRange(report: Report, at: Where, g: Group, c: Checkpoint): void {
  const line = at.line;
  const first = BigInt(c.firstPosition);
  const next = BigInt(c.nextPosition);
  const covered = next > first ? `positions ${range(first, next - 1n)}` : 'no positions';
  if (g.first === null || g.last === null) {
    if (next > first) {
      report(
        { ...at, position: `${first}` },
        'POSITION',
        `positions ${range(first, next - 1n)} missing: the checkpoint covers ${c.recordCount} records, the export has none`,
      );
    }
  } else {
    const end = g.last + 1n;
    let reported = g.positionProblems;
    if (g.first > first) {
      report(
        { line: g.firstLine, streamId: g.streamId, generation: g.generation, position: `${first}` },
        'POSITION',
        `positions ${range(first, g.first - 1n)} missing at the start: the checkpoint (line ${line}) covers ${covered}`,
      );
      reported++;
    } else if (g.first < first) {
      report(
        { line: g.firstLine, streamId: g.streamId, generation: g.generation, position: `${g.first}` },
        'POSITION',
        `records from position ${g.first} lie before the checkpoint's range (line ${line}: ${covered})`,
      );
      reported++;
    }
    if (end < next) {
      report(
        { ...at, position: `${end}` },
        'POSITION',
        `positions ${range(end, next - 1n)} missing at the end: the checkpoint covers ${covered}`,
      );
      reported++;
    } else if (end > next) {
      report({ ...at, position: `${next}` }, 'POSITION', `records continue past the checkpoint's nextPosition ${next} (to ${g.last})`);
      reported++;
    }
    if (reported === 0 && BigInt(g.count) !== next - first) {
      report(at, 'POSITION', `the export has ${g.count} records where the checkpoint covers ${c.recordCount}`);
    }
  }
  if (g.digest.digest() !== c.chainDigest) {
    report(
      at,
      'CHAIN_DIGEST',
      `the ${g.count} records of this stream generation do not hash to the checkpoint's chainDigest (${covered}): a record was changed, swapped, replaced or renumbered`,
    );
  }
}
