import { errors } from '../../shared/errors.js';
import { makeStreamId } from '../../shared/ids.js';
import { monotonicMs } from '../runtime/clock.js';
import type { StorePort } from '../store/port/store-port.js';

/** Per-agent quotas (docs/security.md "Quotas"); 0 turns one off. */
export interface QuotaOptions {
  appendRecordsPerSecond: number;
  /** Append request bytes (each request as sent: its line or batch element) per second. */
  appendBytesPerSecond: number;
  /** Bytes of records an agent may have stored, over the streams it writes. */
  storedBytes: number;
  claimsPerMinute: number;
}

/** Seconds of its rate an append bucket holds: bursts up to this are never slowed. */
const APPEND_BURST_SECONDS = 10;

/** A token bucket on the monotonic clock: `capacity` tokens, refilled at `perMs`. */
class Bucket {
  #tokens: number;
  #last: number;
  constructor(
    readonly capacity: number,
    readonly perMs: number,
    now: number,
  ) {
    this.#tokens = capacity;
    this.#last = now;
  }

  /** Milliseconds until `n` tokens are there (0: now). */
  waitFor(n: number, now: number): number {
    this.#tokens = Math.min(this.capacity, this.#tokens + (now - this.#last) * this.perMs);
    this.#last = now;
    const need = Math.min(n, this.capacity) - this.#tokens;
    return need <= 0 ? 0 : Math.ceil(need / this.perMs);
  }

  take(n: number): void {
    this.#tokens -= n;
  }
}

interface AgentUsage {
  records: Bucket | null;
  bytes: Bucket | null;
  claims: Bucket | null;
  /**
   * LevelDB's estimate of the agent's stored records at first use since start: 0 until the
   * estimate arrives (null: no stored quota). Admission never waits for it, so an append is
   * admitted in the same turn it is read, as the contract needs (a later `operations.get` on
   * the connection sees it pending or committed, never `unknown`).
   */
  onDisk: number | null;
  /** Bytes appended since then. */
  appended: number;
}

/**
 * What one agent may write: records and bytes per second (token buckets holding
 * APPEND_BURST_SECONDS of their rate), stored bytes, claims per minute. Over a rate the answer
 * is RATE_LIMITED with `retryAfterMs`, over stored bytes QUOTA_EXCEEDED; either way nothing was
 * written. Admin calls are not counted (the admin does not append or claim as an agent).
 */
export class Quotas {
  readonly #opts: QuotaOptions;
  readonly #store: StorePort;
  readonly #now: () => number;
  readonly #agents = new Map<string, AgentUsage>();
  #hitListener: ((quota: 'appendRate' | 'storedBytes' | 'claimRate') => void) | null = null;

  constructor(opts: QuotaOptions, store: StorePort, now: () => number = monotonicMs) {
    this.#opts = opts;
    this.#store = store;
    this.#now = now;
  }

  /** Called with the quota each time one refuses a call (metrics). */
  onHit(listener: (quota: 'appendRate' | 'storedBytes' | 'claimRate') => void): void {
    this.#hitListener = listener;
  }

  #usage(agentId: string): AgentUsage {
    let u = this.#agents.get(agentId);
    if (!u) {
      const now = this.#now();
      const o = this.#opts;
      const bucket = (perSecond: number) => (perSecond > 0 ? new Bucket(perSecond * APPEND_BURST_SECONDS, perSecond / 1000, now) : null);
      u = {
        records: bucket(o.appendRecordsPerSecond),
        bytes: bucket(o.appendBytesPerSecond),
        claims: o.claimsPerMinute > 0 ? new Bucket(o.claimsPerMinute, o.claimsPerMinute / 60_000, now) : null,
        onDisk: o.storedBytes > 0 ? 0 : null,
        appended: 0,
      };
      this.#agents.set(agentId, u);
      if (o.storedBytes > 0) {
        const usage = u;
        // An estimate that fails leaves the count at what was appended since the start.
        this.#storedOnDisk(agentId).then(
          (n) => (usage.onDisk = n),
          () => undefined,
        );
      }
    }
    return u;
  }

  /** The store's estimate of the records in the streams `agentId` writes (one per chat it is in). */
  async #storedOnDisk(agentId: string): Promise<number> {
    let total = 0;
    let after: string | undefined;
    for (;;) {
      const chatIds = await this.#store.directory.chatIds(agentId, { ...(after !== undefined ? { after } : {}), limit: 500 });
      for (const chatId of chatIds) total += await this.#store.streams.approximateBytes(makeStreamId(chatId, agentId));
      after = chatIds.at(-1);
      if (chatIds.length < 500) return total;
    }
  }

  /**
   * Before an append of `records` records and `bytes` request bytes by `agentId`: throw
   * RATE_LIMITED or QUOTA_EXCEEDED, or take them from the agent's buckets.
   */
  admitAppend(agentId: string, records: number, bytes: number): void {
    const u = this.#usage(agentId);
    if (u.onDisk !== null) {
      const stored = u.onDisk + u.appended;
      if (stored + bytes > this.#opts.storedBytes) {
        this.#hitListener?.('storedBytes');
        throw errors.quotaExceeded('storedBytes', this.#opts.storedBytes, stored);
      }
    }
    const now = this.#now();
    const wait = Math.max(u.records?.waitFor(records, now) ?? 0, u.bytes?.waitFor(bytes, now) ?? 0);
    if (wait > 0) {
      this.#hitListener?.('appendRate');
      throw errors.rateLimited(
        wait,
        `appends by this agent (quota ${this.#opts.appendRecordsPerSecond} records/s, ${this.#opts.appendBytesPerSecond} bytes/s)`,
      );
    }
    u.records?.take(records);
    u.bytes?.take(bytes);
  }

  /** An append of `bytes` was stored. */
  appended(agentId: string, bytes: number): void {
    this.#usage(agentId).appended += bytes;
  }

  /** Before `streams.claim` by `agentId`: throw RATE_LIMITED past its claims per minute. */
  admitClaim(agentId: string): void {
    const u = this.#usage(agentId);
    if (!u.claims) return;
    const wait = u.claims.waitFor(1, this.#now());
    if (wait > 0) {
      this.#hitListener?.('claimRate');
      throw errors.rateLimited(wait, `streams.claim calls by this agent (quota ${this.#opts.claimsPerMinute} per minute)`);
    }
    u.claims.take(1);
  }
}
