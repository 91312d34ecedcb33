// The rule of the storage fault suite: after a fault, every acknowledged append is either
// readable exactly as acknowledged (and its signature verifies), or its stream is reported
// corrupt (daemon.status lists it, or reading it answers STORAGE_FAILURE/CORRUPT) — never
// silently absent, never overwritten, never reported as trimmed, and operations.get never
// calls an acknowledged operation "unknown".
//
// It speaks only the wire (test/helpers/wire-fixtures.ts), like every integration helper.
// `judgeTrial` then scores a trial against what the fault really changed (store-damage.ts), so
// that flagging everything or refusing to start does not pass as finding the damage.

import type { AppendResult, StoredRecord } from '../../src/shared/types.js';
import { damagedStreams, type StoreDamage } from './store-damage.js';
import { fetchKeys, jsonPreview, messageProblems, ok, type Wire, type WireResponse } from './wire-fixtures.js';

/** An append the daemon acknowledged, as its result reported it. */
export interface AckedAppend {
  streamId: string;
  generation: string;
  firstPosition: string;
  nextPosition: string;
  operationId: string;
  records: StoredRecord[];
}

/** What one check found. */
export interface IntegrityReport {
  acked: number;
  /** Acknowledged appends readable exactly, with verifying signatures. */
  intact: number;
  /** Acknowledged appends not readable whole, on a stream the daemon reports corrupt. */
  reportedCorrupt: number;
  /** `reportedCorrupt` by stream (to compare with what was really damaged: `judgeTrial`). */
  reportedByStream: Record<string, number>;
  /** Problems that break the rule, each naming the append and what went wrong. */
  violations: string[];
  /** Streams daemon.status lists as corrupt. */
  corruptStreams: string[];
}

/** Collects acknowledged appends from `streams.append` answers. */
export class AckLog {
  readonly acked: AckedAppend[] = [];

  record(resp: WireResponse<AppendResult>): void {
    if (resp.result) {
      const r = resp.result;
      this.acked.push({
        streamId: r.streamId,
        generation: r.generation,
        firstPosition: r.firstPosition,
        nextPosition: r.nextPosition,
        operationId: r.operationId,
        records: r.records,
      });
    }
  }
}

const isCorruptError = (resp: WireResponse) => resp.error?.data?.type === 'STORAGE_FAILURE' && resp.error.data.reason === 'CORRUPT';

/**
 * Check every acknowledged append over the wire. `appendProbe(streamId)` appends one more
 * record as the stream's author (or returns the error) so the check can see whether new
 * writes would land on acknowledged positions.
 */
export async function checkAcked(
  admin: Wire,
  acked: AckedAppend[],
  appendProbe?: (streamId: string) => Promise<WireResponse<AppendResult> | null>,
): Promise<IntegrityReport> {
  const violations: string[] = [];
  const status = ok(await admin.call('daemon.status', {}), 'daemon.status');
  const listed = new Set<string>(status.integrity.corruptStreams.map((s) => s.streamId));
  const keys = await fetchKeys(admin);
  const byStream = new Map<string, AckedAppend[]>();
  for (const a of acked) byStream.set(a.streamId, [...(byStream.get(a.streamId) ?? []), a]);
  let intact = 0;
  let reportedCorrupt = 0;
  const reportedByStream: Record<string, number> = {};

  for (const [streamId, appends] of byStream) {
    // Read the stream from 0; stop at the first error and remember what it said.
    const seen = new Map<string, StoredRecord>();
    let readError: WireResponse | null = null;
    const generation = appends[0]!.generation;
    let from = '0';
    for (let i = 0; i < 10_000; i++) {
      const r = await admin.call('streams.read', { streamId, generation, fromPosition: from });
      if (r.error || !r.result) {
        readError = r;
        break;
      }
      for (const rec of r.result.records) seen.set(rec.position, rec);
      if (r.result.records.length === 0) break;
      from = r.result.nextPosition;
    }
    const corrupt = listed.has(streamId) || (readError !== null && isCorruptError(readError));
    if (readError && !isCorruptError(readError)) {
      const d = readError.error!.data;
      const reason = d?.reason;
      const reasonText = reason === undefined ? '' : typeof reason === 'string' ? reason : jsonPreview(reason);
      violations.push(`${streamId}: read from ${from} answered ${d?.type}/${reasonText} instead of records or STORAGE_FAILURE/CORRUPT`);
    }
    for (const a of appends) {
      let whole = true;
      for (const [i, want] of a.records.entries()) {
        const position = (BigInt(a.firstPosition) + BigInt(i)).toString();
        const got = seen.get(position);
        if (got === undefined) {
          whole = false;
          continue;
        }
        if (JSON.stringify(got) !== JSON.stringify(want)) {
          violations.push(
            `${streamId}#${position} (op ${a.operationId}): acknowledged record changed${corrupt ? ' on a stream reported corrupt' : ''}`,
          );
          whole = false;
          continue;
        }
        if (got.wrapper.type === 'chat.message') {
          const problems = messageProblems(got.wrapper.message, keys);
          if (problems.length > 0) violations.push(`${streamId}#${position}: ${problems.join('; ')}`);
        }
      }
      if (whole) intact++;
      else if (corrupt) {
        reportedCorrupt++;
        reportedByStream[streamId] = (reportedByStream[streamId] ?? 0) + 1;
      } else violations.push(`${streamId} op ${a.operationId} [${a.firstPosition}, ${a.nextPosition}): acknowledged but silently absent`);

      // operations.get must never call an acknowledged operation unknown.
      const op = await admin.call('operations.get', { streamId, operationId: a.operationId });
      if (op.result?.state === 'committed') {
        if (op.result.firstPosition !== a.firstPosition || op.result.nextPosition !== a.nextPosition) {
          violations.push(
            `${streamId} op ${a.operationId}: operations.get says [${op.result.firstPosition}, ${op.result.nextPosition}), acknowledged [${a.firstPosition}, ${a.nextPosition})`,
          );
        }
      } else if (op.result) {
        violations.push(`${streamId} op ${a.operationId}: acknowledged, operations.get says ${op.result.state}`);
      } else if (!isCorruptError(op)) {
        violations.push(`${streamId} op ${a.operationId}: operations.get answered ${JSON.stringify(op.error)}`);
      }
    }

    if (appendProbe) {
      const maxAcked = appends.reduce((m, a) => (BigInt(a.nextPosition) > m ? BigInt(a.nextPosition) : m), 0n);
      const probe = await appendProbe(streamId);
      if (probe === null) {
        // The author cannot connect: nothing can be appended to check.
      } else if (probe.result) {
        if (corrupt) violations.push(`${streamId}: reported corrupt, yet an append was accepted at ${probe.result.firstPosition}`);
        else if (BigInt(probe.result.firstPosition) < maxAcked)
          violations.push(`${streamId}: a new append landed at ${probe.result.firstPosition}, over acknowledged positions (< ${maxAcked})`);
      } else if (corrupt && !isCorruptError(probe)) {
        violations.push(
          `${streamId}: append on a corrupt stream answered ${JSON.stringify(probe.error?.data)} instead of STORAGE_FAILURE/CORRUPT`,
        );
      } else if (!corrupt && !isCorruptError(probe)) {
        // A CORRUPT refusal here is damage the daemon found on first use (the author's grant, an
        // operation entry the append checks): reported and named, so not a violation. Anything
        // else on a stream whose records all verified is.
        violations.push(`${streamId}: append on a healthy stream failed: ${JSON.stringify(probe.error)}`);
      }
    }
  }
  return { acked: acked.length, intact, reportedCorrupt, reportedByStream, violations, corruptStreams: [...listed] };
}

/** One fault trial: what the daemon did (null: it refused to start) and what really changed. */
export interface TrialOutcome {
  report: IntegrityReport | null;
  damage: StoreDamage;
  /** Every stream of the trial. */
  streamIds: readonly string[];
  /**
   * The daemon may report streams it cannot localise damage to: after LevelDB drops part of its
   * write-ahead log, every stream written since the last flush is suspect from its position
   * then (src/daemon/store/leveldb/wal-guard.ts), damaged or not. Table and head damage is found per
   * value, so there a stream reported with nothing of its own changed is a false alarm that fails.
   */
  unlocalisedLoss: boolean;
}

/** How a trial scored, and why it fails (empty `failures`: it passes). */
export interface TrialJudgement {
  intact: number;
  /** Reported corrupt, on a stream whose stored data really changed. */
  reportedDamaged: number;
  /** Reported corrupt, on a stream whose stored data LevelDB reads back unchanged. */
  falseAlarms: number;
  refusedToStart: boolean;
  failures: string[];
}

/**
 * Scores a trial against the ground truth: damage found is counted apart from false alarms
 * and from refusals to start, so a daemon that flags everything, or refuses to start, does not
 * pass as one that found the damage.
 */
export function judgeTrial(t: TrialOutcome): TrialJudgement {
  const failures: string[] = [];
  const nothingChanged = !t.damage.unreadable && t.damage.changedKeys.length === 0;
  if (t.report === null) {
    // Refusing is right only when LevelDB itself cannot read the store, or the daemon's own
    // metadata (the store format) is what changed; any other damage is reported per stream.
    const metaChanged = t.damage.changedKeys.some((k) => k.startsWith('meta/'));
    if (!t.damage.unreadable && !metaChanged) {
      failures.push(
        `refused to start on a store LevelDB reads (changed: ${t.damage.changedKeys.slice(0, 5).join(', ') || 'nothing'}): the damage should have been reported per stream`,
      );
    }
    return { intact: 0, reportedDamaged: 0, falseAlarms: 0, refusedToStart: true, failures };
  }
  failures.push(...t.report.violations);
  const hit = damagedStreams(t.damage, t.streamIds);
  let reportedDamaged = 0;
  let falseAlarms = 0;
  for (const [streamId, n] of Object.entries(t.report.reportedByStream)) {
    if (hit.has(streamId)) reportedDamaged += n;
    else {
      falseAlarms += n;
      if (nothingChanged) failures.push(`${streamId}: ${n} appends reported corrupt, yet LevelDB reads the whole store back unchanged`);
      else if (!t.unlocalisedLoss) failures.push(`${streamId}: ${n} appends reported corrupt, yet nothing of this stream changed`);
    }
  }
  return { intact: t.report.intact, reportedDamaged, falseAlarms, refusedToStart: false, failures };
}
