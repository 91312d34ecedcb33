// A raw connection that keeps a ledger of what the daemon owes it (docs/protocol.md §3, JSON-RPC 2.0):
// the test tells it, line by line, what it sent, and it computes from the framing rules alone
// how many answers must come back, and of what kind:
//
//   - each `\n`-terminated, non-empty line is one message; over the line cap it is one
//     REQUEST_TOO_LARGE with id null; not strict UTF-8 or not JSON: one -32700 with id null;
//   - a JSON value that is not an array is one message: an object with a string or finite
//     number `id` gets exactly one answer with that id; a well-formed notification (no id)
//     gets none; anything else gets exactly one answer with id null;
//   - an array is a batch: empty → one single answer with id null; otherwise one array answer
//     holding the answers its elements are owed (by the rule above), or nothing if they are all
//     notifications.
//
// `settle()` waits until everything owed has arrived (a daemon.status sentinel shows the
// connection still answers), and `problems` lists every violation: a missing, duplicate or
// unexpected answer, a line that is not JSON, or an answer that is not well-formed.
//
// The connection itself is the shared raw client (test/helpers/wire-client.mjs), keeping
// nothing: the probe reads every message it parses.

import { ERROR_CODES } from '../../../src/shared/errors.js';
import { WireClient, errorShapeProblems, jsonPreview, type WireError, type WireResponse } from '../../helpers/wire-fixtures.js';

const APPLICATION_CODES = new Map<number, string>(Object.entries(ERROR_CODES).map(([type, code]) => [code, type]));
const PROTOCOL_CODES = new Set([-32700, -32600, -32601]);
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

let probeCounter = 0;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** What one JSON message (not a batch) is owed. */
export type Owed = { kind: 'id'; id: string | number } | { kind: 'null' } | { kind: 'none' };

/** The answer a single JSON value is owed, from JSON-RPC 2.0 alone. */
export function owedFor(m: unknown): Owed {
  if (!isObject(m)) return { kind: 'null' };
  const id = m.id;
  if (typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id))) return { kind: 'id', id };
  if ('id' in m) return { kind: 'null' };
  // No id: a well-formed notification gets no answer; anything else is an invalid request.
  const wellFormed =
    m.jsonrpc === '2.0' &&
    typeof m.method === 'string' &&
    !('result' in m) &&
    !('error' in m) &&
    (!('params' in m) || (typeof m.params === 'object' && m.params !== null));
  return wellFormed ? { kind: 'none' } : { kind: 'null' };
}

export interface ProbeOptions {
  maxLineBytes?: number;
  /** Answers arriving later than this after settle() started are a problem. */
  settleTimeoutMs?: number;
}

export class WireProbe {
  readonly client: WireClient;
  readonly name: string;
  readonly problems: string[] = [];
  /** Every id we expect exactly one answer for, and how many answers it got. */
  readonly #owedIds = new Map<string | number, number>();
  #owedNull = 0;
  #owedArrays = 0;
  #gotNull = 0;
  #gotArrays = 0;
  #closed = false;
  #nextId = 1;
  readonly #maxLineBytes: number;
  readonly #settleTimeoutMs: number;
  /** Requests sent, lines sent, answers received (for the run count). */
  stats = { lines: 0, requests: 0, answers: 0, notifications: 0 };
  readonly #waiters: Array<() => void> = [];
  readonly results = new Map<string | number, WireResponse>();

  private constructor(client: WireClient, name: string, opts: ProbeOptions) {
    this.client = client;
    this.name = name;
    this.#maxLineBytes = opts.maxLineBytes ?? 1_048_576;
    this.#settleTimeoutMs = opts.settleTimeoutMs ?? 15_000;
    client.on('message', (msg) => {
      this.#onMessage(msg);
      this.#wake();
    });
    client.on('garbage', (line) => {
      this.problems.push(`${this.name}: the daemon sent a line that is not JSON: ${line.slice(0, 200)}`);
      this.#wake();
    });
    client.on('close', () => {
      this.#closed = true;
      this.#wake();
    });
  }

  static async connect(socketPath: string, name = 'probe', opts: ProbeOptions = {}): Promise<WireProbe> {
    return new WireProbe(await WireClient.connect(socketPath, { keep: false }), name, opts);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** A fresh id nobody else uses: strings mostly, some numbers (both are valid ids). */
  newId(): string | number {
    probeCounter++;
    const n = this.#nextId++;
    return n % 5 === 0 ? 1_000_000_000 + probeCounter : `${this.name}-${probeCounter}`;
  }

  /** A request object with a fresh id. */
  request(method: string, params?: unknown): { jsonrpc: '2.0'; id: string | number; method: string; params?: unknown } {
    const m: { jsonrpc: '2.0'; id: string | number; method: string; params?: unknown } = { jsonrpc: '2.0', id: this.newId(), method };
    if (params !== undefined) m.params = params;
    return m;
  }

  /** Sends bytes as they are and books what every complete line in them is owed. */
  sendBytes(data: Buffer | string): void {
    const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    this.#book(buf);
    this.client.sendRaw(buf);
  }

  /** Sends one value as one line. */
  sendValue(v: unknown): void {
    this.sendBytes(JSON.stringify(v) + '\n');
  }

  /** Sends `line` (no newline) in pieces with pauses, then the newline. */
  async sendInPieces(line: string, cuts: number[], pauseMs = 2): Promise<void> {
    const buf = Buffer.from(line + '\n', 'utf8');
    this.#book(buf);
    const points = [...new Set(cuts.map((c) => Math.max(0, Math.min(buf.length - 1, c))))].sort((a, b) => a - b);
    let at = 0;
    for (const p of [...points, buf.length]) {
      if (p <= at) continue;
      this.client.sendRaw(buf.subarray(at, p));
      at = p;
      // The pause is the subject: it makes each piece arrive at the daemon as a read of its own.
      await new Promise((r) => setTimeout(r, pauseMs));
    }
  }

  #pendingLine = 0;

  /** Books every complete line of `buf`; a trailing piece joins the next send. */
  #book(buf: Buffer): void {
    let start = 0;
    for (;;) {
      const nl = buf.indexOf(0x0a, start);
      const end = nl === -1 ? buf.length : nl;
      this.#pendingLine += end - start;
      this.#pendingPieces.push(buf.subarray(start, end));
      if (nl === -1) return;
      const bytes = this.#pendingLine;
      const line = bytes > this.#maxLineBytes ? null : Buffer.concat(this.#pendingPieces);
      this.#pendingPieces = [];
      this.#pendingLine = 0;
      start = nl + 1;
      if (bytes === 0) continue;
      this.stats.lines++;
      if (line === null) {
        this.#owedNull++;
        continue;
      }
      let value: unknown;
      try {
        value = JSON.parse(strictUtf8.decode(line));
      } catch {
        this.#owedNull++;
        continue;
      }
      this.#bookValue(value);
    }
  }

  #pendingPieces: Buffer[] = [];

  #bookValue(value: unknown): void {
    if (Array.isArray(value)) {
      if (value.length === 0) {
        this.#owedNull++;
        return;
      }
      let owesSome = false;
      for (const m of value) {
        const o = owedFor(m);
        if (o.kind === 'none') continue;
        owesSome = true;
        this.stats.requests++;
        if (o.kind === 'id') this.#oweId(o.id);
        else this.#owedArrayNull++;
      }
      if (owesSome) this.#owedArrays++;
      return;
    }
    const o = owedFor(value);
    if (o.kind !== 'none') this.stats.requests++;
    if (o.kind === 'id') this.#oweId(o.id);
    else if (o.kind === 'null') this.#owedNull++;
  }

  #owedArrayNull = 0;
  #gotArrayNull = 0;

  #oweId(id: string | number): void {
    if (this.#owedIds.has(id)) throw new Error(`${this.name}: id ${String(id)} used twice by the test`);
    this.#owedIds.set(id, 0);
  }

  #onMessage(msg: unknown): void {
    if (Array.isArray(msg)) {
      this.#gotArrays++;
      if (msg.length === 0) this.problems.push(`${this.name}: empty batch answer`);
      for (const r of msg) this.#onResponse(r, true);
      return;
    }
    if (isObject(msg) && typeof msg.method === 'string' && !('id' in msg)) {
      this.stats.notifications++;
      return;
    }
    this.#onResponse(msg, false);
  }

  #onResponse(r: unknown, inBatch: boolean): void {
    this.stats.answers++;
    const where = `${this.name}: answer ${jsonPreview(r)}`;
    if (!isObject(r)) {
      this.problems.push(`${where}: not an object`);
      return;
    }
    if (r.jsonrpc !== '2.0') this.problems.push(`${where}: jsonrpc is not "2.0"`);
    const hasResult = 'result' in r;
    const hasError = 'error' in r;
    if (hasResult === hasError) this.problems.push(`${where}: must hold exactly one of result and error`);
    if (!('id' in r)) this.problems.push(`${where}: no id`);
    if (hasError) this.problems.push(...errorProblems(r.error).map((p) => `${where}: ${p}`));
    const id = r.id as string | number | null;
    if (id === null) {
      if (!hasError) this.problems.push(`${where}: a result with id null`);
      if (inBatch) this.#gotArrayNull++;
      else this.#gotNull++;
      return;
    }
    const n = this.#owedIds.get(id);
    if (n === undefined) {
      this.problems.push(`${where}: id ${String(id)} was never sent`);
      return;
    }
    if (n >= 1) this.problems.push(`${where}: id ${String(id)} answered ${n + 1} times`);
    this.#owedIds.set(id, n + 1);
    this.results.set(id, r);
  }

  #wake(): void {
    for (const w of this.#waiters.splice(0)) w();
  }

  #outstanding(): string[] {
    const out: string[] = [];
    const missing = [...this.#owedIds].filter(([, n]) => n === 0).map(([id]) => id);
    if (missing.length)
      out.push(`unanswered ids: ${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ` (+${missing.length - 10})` : ''}`);
    if (this.#gotNull < this.#owedNull) out.push(`id-null answers: ${this.#gotNull} of ${this.#owedNull}`);
    if (this.#gotArrays < this.#owedArrays) out.push(`batch answers: ${this.#gotArrays} of ${this.#owedArrays}`);
    if (this.#gotArrayNull < this.#owedArrayNull)
      out.push(`id-null entries in batch answers: ${this.#gotArrayNull} of ${this.#owedArrayNull}`);
    return out;
  }

  #excess(): string[] {
    const out: string[] = [];
    if (this.#gotNull > this.#owedNull) out.push(`${this.#gotNull - this.#owedNull} id-null answers more than owed (${this.#owedNull})`);
    if (this.#gotArrays > this.#owedArrays) out.push(`${this.#gotArrays - this.#owedArrays} batch answers more than owed`);
    if (this.#gotArrayNull > this.#owedArrayNull)
      out.push(`${this.#gotArrayNull - this.#owedArrayNull} id-null batch entries more than owed`);
    return out;
  }

  /**
   * Sends a daemon.status sentinel and waits until it and everything owed so far have arrived.
   * Returns the sentinel's answer (an error is fine on an unauthenticated connection).
   */
  async settle(timeoutMs = this.#settleTimeoutMs): Promise<WireResponse | undefined> {
    const sentinel = this.request('daemon.status', {});
    this.sendValue(sentinel);
    const deadline = Date.now() + timeoutMs;
    while (this.#outstanding().length > 0) {
      if (this.#closed) {
        this.problems.push(`${this.name}: connection closed while owed: ${this.#outstanding().join('; ')}`);
        break;
      }
      if (Date.now() > deadline) {
        this.problems.push(`${this.name}: after ${timeoutMs} ms still owed: ${this.#outstanding().join('; ')}`);
        break;
      }
      // Not a pause: wakes on the next answer (#waiters), at the latest after 50 ms to look at
      // the deadline and the connection again.
      await new Promise<void>((r) => {
        const t = setTimeout(r, 50);
        this.#waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
    this.problems.push(...this.#excess().map((p) => `${this.name}: ${p}`));
    return this.results.get(sentinel.id);
  }

  /** Returns the problems found so far and forgets them (one property run at a time). */
  takeProblems(): string[] {
    return this.problems.splice(0);
  }

  /**
   * After a failed run: forget what is still owed, so the next run (e.g. a shrink) starts clean.
   * Late answers to forgotten ids are then reported as never sent; a failed run fails anyway.
   */
  resetLedger(): void {
    for (const [id, n] of this.#owedIds) if (n === 0) this.#owedIds.set(id, 1);
    this.#owedNull = this.#gotNull = Math.max(this.#owedNull, this.#gotNull);
    this.#owedArrays = this.#gotArrays = Math.max(this.#owedArrays, this.#gotArrays);
    this.#owedArrayNull = this.#gotArrayNull = Math.max(this.#owedArrayNull, this.#gotArrayNull);
  }

  close(): void {
    this.client.close();
  }
}

/** What is wrong with one JSON-RPC error object (empty when it is well-formed). */
export function errorProblems(e: unknown): string[] {
  if (!isObject(e)) return ['error is not an object'];
  const problems = errorShapeProblems(e as unknown as WireError);
  const code = e.code as number;
  const data = isObject(e.data) ? e.data : undefined;
  const type = data?.type as string | undefined;
  if (code === ERROR_CODES.INTERNAL) problems.push(`INTERNAL error (a daemon bug): ${JSON.stringify(e).slice(0, 300)}`);
  else if (APPLICATION_CODES.has(code)) {
    if (type !== APPLICATION_CODES.get(code))
      problems.push(`code ${code} with data.type ${String(type)} (registry says ${APPLICATION_CODES.get(code)})`);
    if (type === 'INVALID_PARAMS' && (typeof data?.path !== 'string' || typeof data.reason !== 'string'))
      problems.push('INVALID_PARAMS without path/reason');
    if (type === 'RATE_LIMITED' && typeof data?.retryAfterMs !== 'number') problems.push('RATE_LIMITED without retryAfterMs');
  } else if (!PROTOCOL_CODES.has(code)) {
    problems.push(`code ${code} is neither a JSON-RPC code nor in the registry`);
  } else if (type !== undefined && !Object.hasOwn(ERROR_CODES, type)) {
    problems.push(`data.type ${type} is not in the registry`);
  }
  return problems;
}
