import { formatDecimal } from '../../../shared/ids.js';
import type { DoctorProblem, DoctorReport, StoredRecord } from '../../../shared/types.js';
import type { Integrity } from '../integrity.js';
import { K, locateKey, prefixEnd } from './key-layout.js';
import type { Signer } from '../../crypto/signer.js';
import type { Storage } from './storage.js';
import type { StreamMeta } from '../stream-meta.js';
import { expandOperation, expandRecord, type CompactOperation, type CompactRecord } from '../record-layout.js';
import { placeOf, StreamTables } from './stream-tables.js';
import {
  checkAgent,
  checkChat,
  checkMessageIndex,
  checkOperation,
  checkRecord,
  generationBounds,
  identityFromChat,
  sealedBounds,
  type StreamScan,
} from './doctor-checks.js';

/**
 * A full scan of the store, for `yello doctor`: every value's checksum; every stream's records
 * against its head (contiguity, no records past the head or in unknown generations, each record
 * where its key says); every message's contentSha256 and signature; operations against their
 * records and log; the message-id, token, username, pair and member indexes against the rows
 * they point to. Streams with problems are marked corrupt (unless `mark` is false), so the
 * daemon stops writing there until someone resets them. Reads the whole store once, in key
 * order, with point reads for cross-checks: memory stays O(streams).
 */
export async function checkStore(
  storage: Storage,
  integrity: Integrity,
  signer: Signer,
  options: { mark?: boolean } = {},
): Promise<DoctorReport> {
  const problems: DoctorProblem[] = [];
  const counts = { values: 0, agents: 0, chats: 0, streams: 0, records: 0, messages: 0, operations: 0 };
  const problem = (
    kind: string,
    key: string | null,
    detail: string,
    where: Partial<Pick<DoctorProblem, 'streamId' | 'generation' | 'position'>> = {},
  ) => {
    const loc = key ? locateKey(key) : { streamId: null, generation: null, position: null };
    problems.push({
      kind,
      key,
      streamId: where.streamId ?? loc.streamId,
      generation: where.generation ?? loc.generation,
      position: where.position ?? loc.position,
      detail,
    });
  };

  // Heads first (one per stream), so records can be checked against them in one pass.
  const scans = new Map<string, StreamScan>();
  const tables = new StreamTables(storage);
  for await (const { key } of storage.entriesChecked<unknown>({ gte: K.streamsPrefix, lt: prefixEnd(K.streamsPrefix) })) {
    const streamId = key.slice(K.streamsPrefix.length);
    let meta: StreamMeta | undefined;
    try {
      meta = tables.head(streamId);
    } catch (err) {
      problem(
        'head',
        key,
        `the stream head fails its check (${String((err as { details?: { detail?: string } }).details?.detail ?? err)})`,
        { streamId },
      );
    }
    scans.set(streamId, { meta, generation: -1, expect: null, firstSeen: null, op: null, lastCreatedAt: null, damage: new Map() });
  }
  const damage = (streamId: string, generation: number, position: number) => {
    const scan = scans.get(streamId);
    if (!scan) return;
    const prev = scan.damage.get(generation);
    if (prev === undefined || position < prev) scan.damage.set(generation, position);
  };

  let current: { streamId: string; scan: StreamScan } | null = null;
  const finishGeneration = () => {
    if (!current) return;
    const { streamId, scan } = current;
    const meta = scan.meta;
    if (meta && scan.generation >= 0) {
      const bounds =
        scan.generation === meta.generation ? { first: meta.firstPosition, next: meta.nextPosition } : sealedBounds(meta, scan.generation);
      const last = scan.expect === null ? null : scan.expect - 1;
      if (!bounds) {
        problem('record', null, `records of generation ${scan.generation}, which the head does not know`, {
          streamId,
          generation: formatDecimal(scan.generation),
        });
        damage(streamId, scan.generation, scan.firstSeen ?? 0);
      } else if (last === null || last < bounds.next - 1) {
        if (bounds.next > bounds.first) {
          const from = last === null ? bounds.first : Math.max(bounds.first, last + 1);
          problem('record', null, `records ${from}..${bounds.next - 1} are missing (the head says the generation ends at ${bounds.next})`, {
            streamId,
            generation: formatDecimal(scan.generation),
            position: formatDecimal(from),
          });
          damage(streamId, scan.generation, from);
        }
      }
    }
  };

  for await (const { key, value, error } of storage.entriesChecked<unknown>({ lt: '\uffff' })) {
    counts.values++;
    const table = key.slice(0, key.indexOf('/'));
    if (error) {
      problem('checksum', key, 'the value fails its checksum');
      const loc = locateKey(key);
      if (loc.streamId && loc.generation !== null) damage(loc.streamId, Number(loc.generation), Number(loc.position ?? 0));
      continue;
    }
    switch (table) {
      case 'a':
        counts.agents++;
        checkAgent(storage, key, value as { id: string; username: string; tokenHash: string }, problem);
        break;
      case 'c':
        counts.chats++;
        checkChat(storage, key, value as { id: string; agentAId: string; agentBId: string }, problem);
        break;
      case 's':
        counts.streams++;
        break;
      case 'o':
        counts.operations++;
        checkOperation(storage, key, expandOperation(key.slice(key.lastIndexOf('/') + 1), value as CompactOperation), problem);
        break;
      case 'x':
        checkMessageIndex(storage, key, value as string, problem);
        break;
      case 'r': {
        counts.records++;
        const loc = locateKey(key);
        const streamId = loc.streamId;
        // Never null for a key of the records table (`r/<stream>/...`); reported rather than assumed.
        if (streamId === null) {
          problem('record', key, 'a record key that names no stream');
          break;
        }
        const generation = Number(loc.generation);
        const position = Number(loc.position);
        const head = scans.get(streamId)?.meta;
        // Left below the retained start by a trim that a crash interrupted: trimmed already
        // (reads fail closed below firstPosition), so not damage, and not a record of the
        // retained range. In the current generation the next compaction deletes it
        // (retention.ts); a reset before that seals it below the sealed generation's start,
        // where it stays (compaction sweeps the current generation only) and is skipped alike.
        const bounds = head ? generationBounds(head, generation) : null;
        if (bounds && position < bounds.first) break;
        if (!current || current.streamId !== streamId || current.scan.generation !== generation) {
          finishGeneration();
          let scan = scans.get(streamId);
          if (!scan) {
            problem('record', key, 'a record of a stream that has no head');
            scan = { meta: undefined, generation, expect: null, firstSeen: null, op: null, lastCreatedAt: null, damage: new Map() };
            scans.set(streamId, scan);
          }
          Object.assign(scan, { generation, expect: null, firstSeen: position, op: null, lastCreatedAt: null });
          current = { streamId, scan };
        }
        const identity = current.scan.meta ?? identityFromChat(storage, streamId);
        let record: StoredRecord;
        try {
          record = expandRecord(value as CompactRecord | StoredRecord, placeOf(identity, generation, position));
        } catch {
          problem('record', key, 'the stored record has an unknown shape');
          damage(streamId, generation, position);
          break;
        }
        if (checkRecord(tables, signer, key, record, streamId, generation, position, current.scan, problem, counts))
          damage(streamId, generation, position);
        break;
      }
      default:
        break;
    }
  }
  finishGeneration();

  for (const [streamId, scan] of scans) {
    if (!scan.meta) continue;
    const { meta } = scan;
    // The record scan already found missing tails; a head past its records with no record at all:
    if (
      meta.nextPosition > meta.firstPosition &&
      storage.get(K.record(streamId, meta.generation, meta.nextPosition - 1)) === undefined &&
      !scan.damage.has(meta.generation)
    ) {
      problem('head', K.stream(streamId), `the head says records end at ${meta.nextPosition}, but the generation has none there`, {
        streamId,
        generation: formatDecimal(meta.generation),
      });
      damage(streamId, meta.generation, meta.nextPosition - 1);
    }
    const chat = storage.get<{ agentAId: string; agentBId: string }>(K.chat(meta.chatId));
    if (!chat || (chat.agentAId !== meta.authorAgentId && chat.agentBId !== meta.authorAgentId)) {
      problem('directory', K.stream(streamId), `the stream's chat ${meta.chatId} is missing or does not include ${meta.authorAgentId}`, {
        streamId,
      });
    }
  }

  if (options.mark !== false) {
    // A head that is unreadable or missing: no generation of the stream can be trusted.
    for (const p of problems) {
      if (p.kind === 'head' && p.streamId && !scans.get(p.streamId)?.meta) {
        integrity.mark({ streamId: p.streamId, generation: null, fromPosition: 0, detail: `yello doctor: ${p.detail}` });
      }
    }
    for (const [streamId, scan] of scans) {
      for (const [generation, position] of scan.damage) {
        const detail =
          problems.find((p) => p.streamId === streamId && p.generation === formatDecimal(generation))?.detail ??
          'yello doctor found damage';
        integrity.mark({ streamId, generation, fromPosition: position, detail: `yello doctor: ${detail}` });
      }
    }
  }
  return { checkedAt: new Date().toISOString(), counts, problems, corruptStreams: integrity.list() };
}
