// A small seeded PRNG (mulberry32) so a failing fault schedule can be replayed from its seed.
// Replay fixes every random choice (actions, sizes, kill delays); thread and disk timing still
// vary, so a replay repeats the schedule, not necessarily the exact interleaving.

/** Deterministic pseudo-random numbers from a 32-bit seed. */
export class Prng {
  #state: number;
  readonly seed: number;

  constructor(seed: number) {
    this.seed = seed >>> 0;
    this.#state = this.seed;
  }

  /** A float in [0, 1). */
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** An integer in [min, max]. */
  range(min: number, max: number): number {
    return min + this.int(max - min + 1);
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  /** An independent generator derived from this one (for per-writer streams of choices). */
  fork(): Prng {
    return new Prng(Math.floor(this.next() * 4294967296));
  }
}

/** The seed from `envName` (decimal or 0x-hex), else a fresh one. */
export function seedFrom(envName: string): number {
  const raw = process.env[envName];
  if (raw !== undefined && raw.trim() !== '') {
    const n = Number(raw.trim());
    if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new Error(`${envName} must be an integer in [0, 2^32): ${raw}`);
    return n;
  }
  return (Date.now() ^ (process.pid << 16) ^ Math.floor(Math.random() * 0x7fffffff)) >>> 0;
}

/** A positive integer from `envName`, else `fallback`. */
export function intFromEnv(envName: string, fallback: number): number {
  const raw = process.env[envName];
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${envName} must be a positive integer: ${raw}`);
  return n;
}
