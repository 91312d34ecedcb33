import type { Logger } from 'pino';
import { K, prefixEnd } from './key-layout.js';
import type { CorruptMark, Integrity } from '../integrity.js';
import type { OpenedStore } from './store-open.js';
import type { StreamMeta } from '../stream-meta.js';
import type { WalIncident } from '../port/values.js';

export type { WalIncident };

const INCIDENTS_KEY = K.meta('wal-incidents');

/** The incidents found so far (for `daemon.status`). */
export function walIncidents(store: OpenedStore): WalIncident[] {
  return store.storage.get<WalIncident[]>(INCIDENTS_KEY) ?? [];
}

/**
 * Act on what LevelDB reported while recovering its log, before anything is served: when it
 * dropped bytes, every stream generation the guard file names is marked corrupt from the
 * position it had before the lost writes (all streams, from their first position, when the
 * guard file is itself damaged). The marks and the incident are stored in one synced batch
 * before the guard starts a new era, so a crash in between repeats the work instead of
 * forgetting it.
 */
export async function applyRecoveryReport(store: OpenedStore, integrity: Integrity, log: Logger): Promise<WalIncident | null> {
  const { storage, guard, guarded, walLoss } = store;
  let incident: WalIncident | null = null;
  const handled = new Set(walIncidents(store).flatMap((i) => i.lines));
  const fresh = walLoss?.lines.filter((l) => !handled.has(l)) ?? [];
  if (fresh.length > 0) {
    const bytes = fresh.reduce((n, l) => n + Number(/dropping (\d+) bytes/.exec(l)?.[1] ?? 0), 0);
    const detail = `LevelDB dropped ${bytes} bytes of its write-ahead log while recovering it; acknowledged writes from this position on may be lost`;
    const marks: CorruptMark[] = [];
    if (guarded.damaged) {
      for await (const { key, value } of storage.entriesChecked<StreamMeta>({ gte: K.streamsPrefix, lt: prefixEnd(K.streamsPrefix) })) {
        const streamId = key.slice(K.streamsPrefix.length);
        marks.push(
          integrity.remember(
            value
              ? { streamId, generation: value.generation, fromPosition: value.firstPosition, detail }
              : { streamId, generation: null, fromPosition: 0, detail },
          ),
        );
      }
    } else {
      for (const t of guarded.touches)
        marks.push(integrity.remember({ streamId: t.streamId, generation: t.generation, fromPosition: t.position, detail }));
    }
    incident = { detectedAt: new Date().toISOString(), lines: fresh, bytes, streams: marks.length, guardDamaged: guarded.damaged };
    await integrity.persistNow(marks);
    await storage.write([{ type: 'put', key: INCIDENTS_KEY, value: [...walIncidents(store), incident] }]);
    log.error(
      { bytes, streams: marks.length, guardDamaged: guarded.damaged },
      'LevelDB dropped part of its write-ahead log at recovery; affected streams are marked corrupt (see yello status, yello doctor)',
    );
  }
  guard.startEra();
  return incident;
}
