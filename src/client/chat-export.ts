// Reading a whole chat as an export (docs/protocol.md §5.9): the one reader that both the CLI's
// `chats export` and the console use, so a checkpoint always fixes the range that is read.

import { ContinuityBreakError, InvalidParamsError, RemoteError, VerificationError } from './errors.js';
import { ChainDigest } from './hashing.js';
import type { Checkpoint, StoredRecord, StreamState } from '../shared/types.js';
import type { YelloClient } from './yello-client.js';

/** A stream generation, or the part of it from `fromPosition` on, that the daemon cannot vouch for. */
export interface Unexportable {
  streamId: string;
  generation: string;
  fromPosition: string | null;
  message: string;
}

/** One item of an export, in order: a generation's records, then its checkpoint; damage as it is met. */
export type ExportItem = { record: StoredRecord } | { checkpoint: Checkpoint } | { unexportable: Unexportable };

/**
 * The daemon reads every record of the range to sign it, so a long stream takes longer than the
 * client's default call timeout; a read-only call that times out has no uncertain outcome.
 */
const CHECKPOINT_TIMEOUT_MS = 10 * 60_000;

const isCorrupt = (err: unknown): err is RemoteError =>
  err instanceof RemoteError && err.type === 'STORAGE_FAILURE' && err.data.reason === 'CORRUPT';

/**
 * Every retained record of a chat (docs/protocol.md §5.9), stream by stream, generation by
 * generation (sealed ones first), in position order, each generation followed by the
 * daemon's checkpoint of exactly that range. The checkpoint is taken first and fixes the
 * range; the records are then read and must hash to it. A generation the daemon cannot vouch
 * for in full yields `unexportable` and then what lies below the damage, with a checkpoint of
 * that part.
 */
export async function* exportChat(c: YelloClient, chatId: string): AsyncGenerator<ExportItem> {
  const { streams } = await c.call('chats.get', { chatId });
  for (const s of streams) {
    for (let g = 1n; g <= BigInt(s.generation); g++) {
      const generation = g.toString();
      const damage: Unexportable[] = [];
      const checkpoint = await checkpointOf(c, s, generation, damage);
      for (const unexportable of damage) yield { unexportable };
      if (!checkpoint) continue;
      const digest = new ChainDigest();
      const end = BigInt(checkpoint.nextPosition);
      let from = checkpoint.firstPosition;
      while (BigInt(from) < end) {
        const batch = await c.call('streams.read', { streamId: s.streamId, generation, fromPosition: from });
        for (const record of batch.records) {
          if (BigInt(record.position) >= end) break;
          digest.add(record);
          yield { record };
        }
        from = batch.nextPosition;
      }
      if (digest.digest() !== checkpoint.chainDigest) {
        throw new VerificationError(
          `${s.streamId} generation ${generation}: the records read do not hash to the daemon's checkpoint of them; export again`,
          null,
        );
      }
      yield { checkpoint };
    }
  }
}

/**
 * The checkpoint of a generation's retained range; where the daemon reports damage, of the
 * part below it (each answer names where the damage starts, so this narrows at most a few
 * times). Null for a generation number no reset used, or one with nothing intact to vouch for.
 */
async function checkpointOf(c: YelloClient, s: StreamState, generation: string, damage: Unexportable[]): Promise<Checkpoint | null> {
  let nextPosition: string | undefined;
  for (;;) {
    try {
      return await c.call('streams.checkpoint', { streamId: s.streamId, generation, nextPosition }, { timeoutMs: CHECKPOINT_TIMEOUT_MS });
    } catch (err) {
      // A reset moves past every corrupt-marked generation, so a sealed number may never have existed.
      if (err instanceof ContinuityBreakError && err.reason === 'GENERATION_CHANGED' && generation !== s.generation) return null;
      // The damage starts below the retained range: nothing of this generation can be vouched for.
      if (nextPosition !== undefined && err instanceof InvalidParamsError) return null;
      if (!isCorrupt(err)) throw err;
      const at = typeof err.data.fromPosition === 'string' && err.data.generation === generation ? err.data.fromPosition : null;
      damage.push({ streamId: s.streamId, generation, fromPosition: at, message: err.message });
      if (at === null || (nextPosition !== undefined && BigInt(at) >= BigInt(nextPosition))) return null;
      nextPosition = at;
    }
  }
}
