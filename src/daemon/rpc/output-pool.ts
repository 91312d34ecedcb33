import { PAGE_BYTES } from '../limits.js';
import { monotonicMs } from '../runtime/clock.js';

/** What the pool needs of a connection. */
export interface PoolMember {
  /** Output written and not yet taken by the peer (the socket's writableLength). */
  unsent(): number;
  /** The pool has room again for this member: resume reading input and deliveries. */
  wake(): void;
  /** Close the connection, with an audit line: it holds the most of an exhausted budget. */
  shed(fields: Record<string, number>): void;
}

interface Entry {
  member: PoolMember;
  /** Unsent bytes as last seen. */
  unsent: number;
  /** Reads admitted and not finished, each counted as one page (PAGE_BYTES). */
  reads: number;
}

/** How often unsent output is looked at again (it shrinks as peers read, without an event). */
const SWEEP_MS = 50;
/** A read of a connection holding nothing that waits this long makes the pool close its biggest consumer. */
const SHED_AFTER_MS = 1_000;

/**
 * The daemon-wide memory budget for queued answers and pending reads (docs/security.md
 * "Memory budget"): the output written and not read by peers, plus every read in progress
 * counted as a full page, over all connections. The per-connection caps (output-budget.ts,
 * WRITE_HIGH_WATER, --max-unsent-bytes) bound one connection; this bounds their sum.
 *
 * Under the budget everything runs. At the budget, a connection that already holds output or a
 * read waits: it reads no more input and gets no deliveries, and its next read starts only when
 * there is room (one holding nothing may still run one read, up to the hard limit, so others'
 * small calls keep answering). Past the hard limit (budget × 1.25), or when the read of a
 * connection holding nothing has waited SHED_AFTER_MS, the connection holding the most is
 * closed, with an audit line: the biggest consumers wait first and are closed first.
 */
export class OutputPool {
  readonly #limit: number;
  readonly #hard: number;
  readonly #entries = new Map<PoolMember, Entry>();
  /** Reads waiting for room, oldest first. */
  readonly #waiting: Array<{ entry: Entry; since: number; go: () => void }> = [];
  /** Members told to wait (congested by the pool): woken when the pool is under its budget. */
  readonly #held = new Set<Entry>();
  #total = 0;
  /** Members holding anything (unsent output or a read): the budget's fair share is split among them. */
  #active = 0;
  readonly #timer: NodeJS.Timeout;

  constructor(limitBytes: number) {
    this.#limit = limitBytes;
    this.#hard = Math.floor(limitBytes * 1.25);
    this.#timer = setInterval(() => {
      this.#sweep();
    }, SWEEP_MS);
    this.#timer.unref();
  }

  /** Bytes counted now: unsent output plus one page per read in progress. */
  get total(): number {
    return this.#total;
  }

  get limit(): number {
    return this.#limit;
  }

  join(member: PoolMember): void {
    this.#entries.set(member, { member, unsent: 0, reads: 0 });
  }

  leave(member: PoolMember): void {
    const e = this.#entries.get(member);
    if (!e) return;
    this.#set(e, 0, 0);
    this.#entries.delete(member);
    this.#held.delete(e);
    for (let i = this.#waiting.length - 1; i >= 0; i--) {
      const w = this.#waiting[i];
      if (w?.entry === e) {
        this.#waiting.splice(i, 1);
        // Released so the request's code can see the connection closed and drop the work.
        w.go();
      }
    }
    this.#admitWaiting();
  }

  /** The member wrote or its peer read: count its unsent output again. */
  update(member: PoolMember): void {
    const e = this.#entries.get(member);
    if (!e) return;
    const unsent = member.unsent();
    const shrank = unsent < e.unsent;
    this.#set(e, unsent, e.reads);
    if (shrank) this.#admitWaiting();
  }

  /** Whether `member` must wait (congested by the budget): the pool is full and it holds some of it. */
  holds(member: PoolMember): boolean {
    const e = this.#entries.get(member);
    if (!e || this.#total < this.#limit || e.unsent + e.reads === 0) return false;
    this.#held.add(e);
    return true;
  }

  /**
   * Start a read for `member` (`chats.history`, `streams.read`): resolves when there is room
   * for one more page. Call `done` exactly once when its answer is written or dropped.
   */
  async startRead(member: PoolMember): Promise<void> {
    const e = this.#entries.get(member);
    if (!e) return;
    if (this.#mayStart(e)) {
      this.#set(e, e.unsent, e.reads + 1);
      return;
    }
    // Counted by #admitWaiting when it lets this read go (or never, if the connection left).
    await new Promise<void>((go) => this.#waiting.push({ entry: e, since: monotonicMs(), go }));
  }

  /** The read started by `startRead` is over: its answer is written (and counted as unsent) or dropped. */
  endRead(member: PoolMember): void {
    const e = this.#entries.get(member);
    if (!e || e.reads === 0) return;
    this.#set(e, e.unsent, e.reads - 1);
    this.update(member);
    this.#admitWaiting();
  }

  close(): void {
    clearInterval(this.#timer);
  }

  #set(e: Entry, unsent: number, reads: number): void {
    const before = e.unsent + e.reads;
    this.#total += unsent - e.unsent + (reads - e.reads) * PAGE_BYTES;
    e.unsent = unsent;
    e.reads = reads;
    const after = unsent + reads;
    if (before === 0 && after > 0) this.#active++;
    else if (before > 0 && after === 0) this.#active--;
  }

  /**
   * Whether one more read of `e` fits: within the budget and within its fair share of it (the
   * budget split among the connections holding anything, at least one page). A connection
   * holding nothing may run one read up to the hard limit, so small callers are not starved.
   */
  #mayStart(e: Entry): boolean {
    const holds = e.unsent + e.reads * PAGE_BYTES;
    if (holds === 0) return this.#total + PAGE_BYTES <= this.#hard;
    const share = Math.max(PAGE_BYTES, Math.floor(this.#limit / Math.max(1, this.#active)));
    return this.#total + PAGE_BYTES <= this.#limit && holds + PAGE_BYTES <= share;
  }

  #admitWaiting(): void {
    // In order, skipping those that must still wait: one holding nothing goes before a big one.
    for (let i = 0; i < this.#waiting.length && this.#total + PAGE_BYTES <= this.#hard;) {
      const w = this.#waiting[i];
      if (!w || !this.#mayStart(w.entry)) {
        i++;
        continue;
      }
      this.#waiting.splice(i, 1);
      // Counted now, so the next waiter sees this read's page.
      this.#set(w.entry, w.entry.unsent, w.entry.reads + 1);
      w.go();
    }
    // Woken: everyone once the pool is under budget; before that, those whose peer read it all.
    for (const e of [...this.#held]) {
      if (this.#total >= this.#limit && e.unsent + e.reads > 0) continue;
      this.#held.delete(e);
      e.member.wake();
    }
  }

  #sweep(): void {
    for (const e of this.#entries.values()) this.#set(e, e.member.unsent(), e.reads);
    // Stuck: a read of a connection holding nothing has waited too long (one that holds output
    // it does not read just waits: closing others for it would only make more output).
    const now = monotonicMs();
    const stuck = this.#waiting.find((w) => w.entry.unsent + w.entry.reads === 0 && now - w.since >= SHED_AFTER_MS);
    if (this.#total > this.#hard || stuck) this.#shedBiggest(stuck?.entry ?? null);
    this.#admitWaiting();
  }

  /** Close the connection holding the most (not `spare`, the waiter it is done for). */
  #shedBiggest(spare: Entry | null): void {
    let biggest: Entry | null = null;
    for (const e of this.#entries.values()) {
      if (e === spare) continue;
      if (!biggest || e.unsent + e.reads * PAGE_BYTES > biggest.unsent + biggest.reads * PAGE_BYTES) biggest = e;
    }
    if (!biggest || biggest.unsent === 0) return;
    const fields = { unsentBytes: biggest.unsent, readsInProgress: biggest.reads, budgetBytes: this.#limit, totalBytes: this.#total };
    this.leave(biggest.member);
    biggest.member.shed(fields);
  }
}
