// Quota refusals for the overview. The daemon counts them (`yello_quota_hits_total` of
// `daemon.metrics`, by quota) but keeps no list of them, and counters only grow: a person needs
// to know whether agents are being refused *now*. So the console samples the counter at each
// overview and reports what it grew by within the window.

import type { YelloClient } from '../client/index.js';

/** Refusals older than this no longer need a person. */
export const QUOTA_WINDOW_MS = 10 * 60_000;

/** One quota's refusals within the window (or since the daemon started, on the first look). */
export interface QuotaRefusals {
  quota: string;
  count: number;
  /** True when there was no earlier sample: the count is since the daemon started. */
  sinceStart: boolean;
}

interface Sample {
  atMs: number;
  counts: Map<string, number>;
}

const LINE = /^yello_quota_hits_total\{quota="([A-Za-z]+)"\} (\d+(?:\.\d+)?(?:e\+?\d+)?)$/;

/** The quota counters of one Prometheus text scrape. */
export function quotaCounts(text: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = LINE.exec(line.trim());
    if (m?.[1] !== undefined && m[2] !== undefined) counts.set(m[1], Number(m[2]));
  }
  return counts;
}

export class QuotaWatch {
  readonly #samples: Sample[] = [];
  readonly #now: () => number;

  constructor(now: () => number = () => performance.now()) {
    this.#now = now;
  }

  /** Samples the daemon's counters and returns the quotas that refused within the window. */
  async look(c: YelloClient): Promise<QuotaRefusals[]> {
    const { text } = await c.call('daemon.metrics', {});
    return this.add(quotaCounts(text));
  }

  /** Adds a sample taken now and compares it with the oldest one still inside the window. */
  add(counts: Map<string, number>): QuotaRefusals[] {
    const now = this.#now();
    while (this.#samples.length > 1 && now - (this.#samples[1]?.atMs ?? now) >= QUOTA_WINDOW_MS) this.#samples.shift();
    const base = this.#samples[0];
    this.#samples.push({ atMs: now, counts });
    // A restarted daemon starts its counters again: a count below the base is since that start.
    const out: QuotaRefusals[] = [];
    for (const [quota, count] of counts) {
      const before = base?.counts.get(quota);
      const restarted = before !== undefined && count < before;
      const grown = before === undefined || restarted ? count : count - before;
      if (grown > 0) out.push({ quota, count: grown, sinceStart: base === undefined || restarted });
    }
    return out;
  }
}
