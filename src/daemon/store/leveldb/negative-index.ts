import { K, prefixEnd } from './key-layout.js';
import type { Storage } from './storage.js';
import type { StreamMeta } from '../stream-meta.js';

/**
 * A scalable Bloom filter of strings: `mightHave` never answers false for a string that was
 * added (no false negatives), and answers true for one that was not with a small probability.
 * When the newest filter is full a four times larger one is started, so the false-positive rate
 * stays bounded however many strings arrive, without knowing the count in advance.
 */
export class ScalableBloom {
  readonly #filters: BloomFilter[] = [];
  /** The filter new strings go to: the last of `#filters`. */
  #newest: BloomFilter;

  constructor(initialCapacity = 256) {
    this.#newest = this.#grow(initialCapacity);
  }

  #grow(capacity: number): BloomFilter {
    // 14 bits per element and 7 hashes: about 0.15 % false positives per filter; filters grow
    // fourfold, so a million ids take about nine of them and 1.7 MiB.
    const size = Math.max(64, Math.ceil(capacity * 14));
    const filter = { bits: new Uint32Array(Math.ceil(size / 32)), size, capacity, count: 0 };
    this.#filters.push(filter);
    return filter;
  }

  add(value: string): void {
    if (this.#newest.count >= this.#newest.capacity) this.#newest = this.#grow(this.#newest.capacity * 4);
    const f = this.#newest;
    const [h1, h2] = hashes(value);
    for (let i = 0; i < HASHES; i++) setBit(f.bits, ((h1 + i * h2) % f.size) >>> 0);
    f.count++;
  }

  mightHave(value: string): boolean {
    const [h1, h2] = hashes(value);
    for (const f of this.#filters) {
      let all = true;
      for (let i = 0; i < HASHES && all; i++) {
        all = testBit(f.bits, ((h1 + i * h2) % f.size) >>> 0);
      }
      if (all) return true;
    }
    return false;
  }

  /** Bytes held, for memory accounting. */
  get bytes(): number {
    return this.#filters.reduce((n, f) => n + f.bits.byteLength, 0);
  }
}

const HASHES = 7;

interface BloomFilter {
  bits: Uint32Array;
  /** Bits in use: every bit index is below it, so its word is inside `bits`. */
  size: number;
  capacity: number;
  count: number;
}

// `bits` has a word for every bit index below `size`, so the `?? 0` below never applies; it
// stands in for the index check the compiler cannot see.
function setBit(bits: Uint32Array, bit: number): void {
  const word = bit >>> 5;
  bits[word] = (bits[word] ?? 0) | (1 << (bit & 31));
}

function testBit(bits: Uint32Array, bit: number): boolean {
  return ((bits[bit >>> 5] ?? 0) & (1 << (bit & 31))) !== 0;
}

/** Two independent 32-bit FNV-1a variants (double hashing: h1 + i·h2). */
function hashes(value: string): [number, number] {
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ 0x5bd1e995;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 15;
  }
  return [a >>> 0, (b | 1) >>> 0];
}

/**
 * What one stream has already stored, for appends to skip the LevelDB point reads that almost
 * always miss (an operationId never used before, a clientMessageId never sent before): a miss in
 * the filter is certain, a hit is confirmed by the real read. Built from a keys-only scan on
 * first use; until it is ready every lookup reads LevelDB. Admitted appends add their ids at
 * once, so the filter never lags behind what a lookup would find.
 */
export class StreamNegativeIndex {
  readonly operations = new ScalableBloom();
  readonly #messages = new Map<number, ScalableBloom>();
  ready = false;

  messages(generation: number): ScalableBloom {
    let bloom = this.#messages.get(generation);
    if (!bloom) this.#messages.set(generation, (bloom = new ScalableBloom()));
    return bloom;
  }

  /** Whether the operationId may exist (false: certainly not). */
  mayHaveOperation(operationId: string): boolean {
    return !this.ready || this.operations.mightHave(operationId);
  }

  /** Whether the clientMessageId may exist in `generation` (false: certainly not). */
  mayHaveMessage(generation: number, clientMessageId: string): boolean {
    return !this.ready || this.messages(generation).mightHave(clientMessageId);
  }
}

/** The negative index of each stream appended to in this process; dropped when the store fails. */
export class NegativeIndexes {
  readonly #storage: Storage;
  readonly #byStream = new Map<string, StreamNegativeIndex>();

  constructor(storage: Storage) {
    this.#storage = storage;
    storage.onFailure(() => {
      this.#byStream.clear();
    });
  }

  /** Whether the stream's index is built. */
  ready(streamId: string): boolean {
    return this.#byStream.get(streamId)?.ready === true;
  }

  /**
   * The negative index of a stream, started on its first append in this process: until the
   * keys-only scan has filled it, every lookup reads LevelDB.
   */
  of(meta: StreamMeta): StreamNegativeIndex {
    const index = this.#byStream.get(meta.streamId);
    if (index) return index;
    const fresh = new StreamNegativeIndex();
    this.#byStream.set(meta.streamId, fresh);
    const ops = K.operationsPrefix(meta.streamId);
    const messages = K.messageIdsPrefix(meta.streamId, meta.generation);
    void (async () => {
      for await (const key of this.#storage.keys({ gte: ops, lt: prefixEnd(ops) })) fresh.operations.add(key.slice(ops.length));
      for await (const key of this.#storage.keys({ gte: messages, lt: prefixEnd(messages) })) {
        fresh.messages(meta.generation).add(key.slice(messages.length));
      }
      fresh.ready = true;
    })().catch(() => {
      // Not ready stays not ready: every lookup keeps reading LevelDB, which is always correct.
    });
    return fresh;
  }
}
