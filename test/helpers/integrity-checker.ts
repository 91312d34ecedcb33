// The rule of the storage fault suite: after a fault, every acknowledged append is either
// readable exactly as acknowledged (and its signature verifies), or its stream is reported
// corrupt (daemon.status lists it, or reading it answers STORAGE_FAILURE/CORRUPT) — never
// silently absent, never overwritten, never reported as trimmed, and operations.get never
// calls an acknowledged operation "unknown".
//
// It speaks only the wire (test/helpers/wire-fixtures.ts), like every integration helper.

import type { AppendResult, StoredRecord } from '../../src/shared/types.js';
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
  /** Acknowledged appends on a stream the daemon reports corrupt. */
  reportedCorrupt: number;
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
      else if (corrupt) reportedCorrupt++;
      else violations.push(`${streamId} op ${a.operationId} [${a.firstPosition}, ${a.nextPosition}): acknowledged but silently absent`);

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
  return { acked: acked.length, intact, reportedCorrupt, violations, corruptStreams: [...listed] };
}
