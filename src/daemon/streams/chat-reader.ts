import { errors } from '../../shared/errors.js';
import { formatDecimal, parseDecimal } from '../../shared/ids.js';
import type { ReadBatch, StoredRecord } from '../../shared/types.js';
import type { TokenCodec } from '../crypto/token-codec.js';
import type { Caller } from '../caller.js';
import { chatStreamIds } from '../directory/chats.js';
import type { Directory } from '../directory/directory.js';
import { PAGE_BYTES } from '../limits.js';
import { monotonicMs } from '../runtime/clock.js';
import type { HistoryRequest, WaitingReadRequest } from '../requests.js';
import type { StreamMeta } from '../store/stream-meta.js';
import type { CommittedRange } from './heads.js';
import type { SizedRecord } from './stream-reader.js';
import type { StreamStore } from './stream-store.js';
import { isHistoryCursor, isLiveBody, isPair, type HistoryCursor, type LiveCursor } from './chat-cursors.js';

const HISTORY_KIND = 'history';
const LIVE_KIND = 'live';

/**
 * The read paths of a chat, on top of one stream's reads (stream-reader.ts): the long poll of
 * `streams.read`, `chats.history` snapshot paging over both streams, and the live cursors that
 * `chats.follow` shares. Every path fails closed: a missing stream, another generation or a
 * trimmed range is a CONTINUITY_BREAK, never a skip.
 */
export class ChatReader {
  readonly #streams: StreamStore;
  readonly #directory: Directory;
  readonly #codec: TokenCodec;
  readonly #waiters = new Map<string, Set<() => void>>();

  constructor(streams: StreamStore, directory: Directory, codec: TokenCodec) {
    this.#streams = streams;
    this.#directory = directory;
    this.#codec = codec;
    streams.listen({
      committed: (range: CommittedRange) => {
        this.#wake(range.streamId);
      },
      discontinuity: (streamId: string) => {
        this.#wake(streamId);
      },
      moved: (streamId: string) => {
        this.#wake(streamId);
      },
    });
  }

  #wake(streamId: string): void {
    const set = this.#waiters.get(streamId);
    if (!set) return;
    this.#waiters.delete(streamId);
    for (const w of set) w();
  }

  /** Resolve on the next commit or discontinuity of `streamId`, or after `ms`. */
  #waitFor(streamId: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const set = this.#waiters.get(streamId) ?? new Set<() => void>();
      this.#waiters.set(streamId, set);
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
    });
  }

  /**
   * `streams.read`, waiting up to `waitMs` for records when none are available yet. The page
   * budget is asked for at each read, not held while waiting: a long poll reserves nothing.
   */
  async read(caller: Caller, p: WaitingReadRequest, pageBytes: () => number = () => PAGE_BYTES): Promise<ReadBatch> {
    const deadline = monotonicMs() + p.waitMs;
    for (;;) {
      const batch = await this.#streams.read(caller, { ...p, maxBytes: Math.min(p.maxBytes, pageBytes()) });
      const remaining = deadline - monotonicMs();
      if (batch.records.length > 0 || batch.sealed || remaining <= 0) return batch;
      await this.#waitFor(p.streamId, remaining);
    }
  }

  // ---- live cursors ---------------------------------------------------------------------

  /** Encode a compound cursor. */
  liveCursor(c: LiveCursor): string {
    const s: Record<string, [number, number]> = {};
    for (const [id, v] of Object.entries(c.streams)) s[id] = [v.generation, v.position];
    return this.#codec.seal(LIVE_KIND, { c: c.chatId, s });
  }

  /** Decode a compound cursor of `chatId`, or INVALID_PARAMS at `cursor`. */
  openLiveCursor(chatId: string, token: string, streamIds: [string, string]): LiveCursor {
    const v = this.#codec.open(LIVE_KIND, token);
    if (!isLiveBody(v)) {
      throw errors.invalidParams('cursor', 'not a live cursor issued by this deployment (HMAC check failed or wrong kind)');
    }
    if (v.c !== chatId) throw errors.invalidParams('cursor', 'the cursor belongs to another chat');
    const streams: LiveCursor['streams'] = {};
    for (const id of streamIds) {
      const entry = v.s[id];
      if (!isPair(entry)) throw errors.invalidParams('cursor', 'the cursor does not cover this chat');
      streams[id] = { generation: entry[0], position: entry[1] };
    }
    return { chatId, streams };
  }

  // ---- history --------------------------------------------------------------------------

  /**
   * `chats.history`: snapshot paging over both directions' messages. A page ends at `limit`
   * messages or once its records reach `maxBytes` (always at least one), and `nextCursor`
   * continues exactly after the last entry of each direction it holds.
   */
  async history(
    caller: Caller,
    p: HistoryRequest,
    maxBytes = PAGE_BYTES,
  ): Promise<{ entries: StoredRecord[]; nextCursor: string | null; liveCursor: string }> {
    const chat = this.#directory.readableChat(caller, p.chatId);
    const ids = chatStreamIds(chat);
    const limit = p.limit;
    let cur: HistoryCursor;
    if (p.cursor === undefined) {
      const metas = ids.map((id) => this.#streams.continuingMeta(id)) as [StreamMeta, StreamMeta];
      const direction = p.direction ?? 'backward';
      const g: [number, number] = [metas[0].generation, metas[1].generation];
      const h: [number, number] = [metas[0].nextPosition, metas[1].nextPosition];
      const f: [number, number] = [metas[0].firstPosition, metas[1].firstPosition];
      cur = { c: chat.id, d: direction, g, h, f, p: direction === 'forward' ? [...f] : [...h] };
    } else {
      const v = this.#codec.open(HISTORY_KIND, p.cursor);
      if (!isHistoryCursor(v))
        throw errors.invalidParams('cursor', 'not a history cursor issued by this deployment (HMAC check failed or wrong kind)');
      if (v.c !== chat.id) throw errors.invalidParams('cursor', 'the cursor belongs to another chat');
      if (p.direction !== undefined && p.direction !== v.d)
        throw errors.invalidParams('direction', 'a history cursor keeps the direction of the call that made it');
      cur = v;
    }
    const liveCursor = this.liveCursor({
      chatId: chat.id,
      streams: { [ids[0]]: { generation: cur.g[0], position: cur.h[0] }, [ids[1]]: { generation: cur.g[1], position: cur.h[1] } },
    });
    const sides = await Promise.all(ids.map((id, i) => this.#historySide(id, i as 0 | 1, cur, limit, maxBytes)));
    const merged = merge(sides, cur.d, limit, maxBytes);
    const nextP: [number, number] = [...cur.p];
    for (const { side, record } of merged) {
      const pos = parseDecimal(record.position);
      nextP[side] = cur.d === 'forward' ? pos + 1 : pos;
    }
    // A side whose scan ended without being cut short by the merge is exhausted: move its
    // pointer to the scan's end so the next page does not rescan receipts and fences.
    sides.forEach((s, i) => {
      if (s.exhausted && merged.filter((m) => m.side === i).length === s.messages.length) nextP[i] = s.end;
    });
    const done = cur.d === 'forward' ? nextP[0] >= cur.h[0] && nextP[1] >= cur.h[1] : nextP[0] <= cur.f[0] && nextP[1] <= cur.f[1];
    const more = !done;
    const entries = merged.map((m) => m.record);
    if (cur.d === 'backward') entries.reverse();
    return {
      entries,
      nextCursor: more ? this.#codec.seal(HISTORY_KIND, { ...cur, p: nextP } satisfies HistoryCursor) : null,
      liveCursor,
    };
  }

  /**
   * Up to `limit` messages of one side of the snapshot, in paging order, read with a range
   * iterator from the cursor's position (O(page), whatever the history length), stopping once
   * their stored bytes reach `maxBytes`. A side that is not exhausted holds at least one message.
   */
  async #historySide(streamId: string, i: 0 | 1, cur: HistoryCursor, limit: number, maxBytes: number): Promise<HistorySide> {
    const meta = this.#streams.continuingMeta(streamId);
    const generation = cur.g[i];
    if (meta.generation !== generation)
      throw errors.continuityBreak('GENERATION_CHANGED', streamId, formatDecimal(generation), formatDecimal(meta.generation));
    const forward = cur.d === 'forward';
    const lo = forward ? cur.p[i] : cur.f[i];
    const hi = forward ? cur.h[i] : cur.p[i];
    // A transcript that reaches a corruption mark would hide what may be missing: refuse it,
    // also when the mark lies exactly at the snapshot's head ("nothing after it" is unknown).
    this.#streams.assertReadable(streamId, generation, cur.h[i]);
    if (lo >= hi) return { messages: [], exhausted: true, end: forward ? hi : lo };
    if (forward && lo < meta.firstPosition) {
      throw errors.continuityBreak('PREFIX_UNAVAILABLE', streamId, formatDecimal(lo), formatDecimal(meta.firstPosition));
    }
    const messages: SizedRecord[] = [];
    let total = 0;
    // The next position the scan would have read: it tells whether the scan reached the end.
    let expect = forward ? lo : hi - 1;
    let exhausted = true;
    for await (const { record, bytes } of this.#streams.scan(streamId, generation, lo, hi, !forward)) {
      expect += forward ? 1 : -1;
      if (record.wrapper.type !== 'chat.message') continue;
      messages.push({ record, bytes });
      total += bytes;
      if (messages.length >= limit || total >= maxBytes) {
        exhausted = false;
        break;
      }
    }
    if (exhausted) {
      const reachedEnd = forward ? expect === hi : expect === lo - 1;
      // Backward paging that reaches the retained start simply ends; anything else missing
      // inside the snapshot was trimmed under us, or lost (corruption).
      if (!reachedEnd && !(!forward && expect < meta.firstPosition)) throw this.#streams.missing(streamId, generation, expect);
    }
    return { messages, exhausted, end: forward ? hi : lo };
  }
}

type HistorySide = { messages: SizedRecord[]; exhausted: boolean; end: number };
type Side = { side: 0 | 1; record: StoredRecord };

/** (createdAt, fromAgentId, position) — the transcript order of §6. */
function compare(a: StoredRecord, b: StoredRecord): number {
  const ma = a.wrapper.type === 'chat.message' ? a.wrapper.message : null;
  const mb = b.wrapper.type === 'chat.message' ? b.wrapper.message : null;
  const ta = ma?.signature.createdAt ?? '';
  const tb = mb?.signature.createdAt ?? '';
  if (ta !== tb) return ta < tb ? -1 : 1;
  const fa = ma?.fromAgentId ?? '';
  const fb = mb?.fromAgentId ?? '';
  if (fa !== fb) return fa < fb ? -1 : 1;
  return parseDecimal(a.position) - parseDecimal(b.position);
}

/**
 * Merge two per-stream lists already in paging order; take the first `limit`, stopping once
 * the taken records reach `maxBytes`. A side that was cut short (not exhausted) bounds the
 * merge: past its last message, what comes next on that side is unknown, so the page ends
 * there. Each cut side holds at least one message, so a page always makes progress.
 */
function merge(sides: HistorySide[], direction: 'backward' | 'forward', limit: number, maxBytes: number): Side[] {
  const [sa, sb] = sides as [HistorySide, HistorySide];
  const a = sa.messages;
  const b = sb.messages;
  const sign = direction === 'forward' ? 1 : -1;
  const out: Side[] = [];
  let bytes = 0;
  let i = 0;
  let j = 0;
  while (out.length < limit && bytes < maxBytes && (i < a.length || j < b.length)) {
    if ((i >= a.length && !sa.exhausted) || (j >= b.length && !sb.exhausted)) break;
    const x = a[i];
    const y = b[j];
    let next: SizedRecord;
    let side: 0 | 1;
    if (x !== undefined && (y === undefined || sign * compare(x.record, y.record) <= 0)) {
      next = x;
      side = 0;
      i++;
    } else if (y !== undefined) {
      next = y;
      side = 1;
      j++;
    } else break;
    out.push({ side, record: next.record });
    bytes += next.bytes;
  }
  return out;
}
