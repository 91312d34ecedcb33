// An independent, deliberately dumb JSON-RPC 2.0 client for the yello wire (docs/protocol.md §3).
// It shares no code with src/: it writes one JSON message per `\n`-terminated line, parses
// each response line, matches responses to requests by id, and keeps everything else
// (notifications, `id: null` errors) for the test to inspect. It never throws on a JSON-RPC
// error: `call()` resolves with the whole response object so tests can assert on
// `error.code` and `error.data.type`.
//
// It also holds the independent signature check for stored `chat.message` records (§5),
// written from the contract with node:crypto only.

import { createHash, createPublicKey, verify as cryptoVerify } from 'node:crypto';
import { EventEmitter } from 'node:events';
import net from 'node:net';

/** A JSON-RPC error object as it arrived on the wire. */
export interface RpcErrorObject {
  code: number;
  message: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  data?: any;
}

/** A JSON-RPC response as it arrived on the wire; exactly one of result/error is expected. */
export interface RpcResponse {
  jsonrpc?: string;
  id?: string | number | null;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  result?: any;
  error?: RpcErrorObject;
}

/** A server-to-client notification (a message with `method` and no `id`). */
export interface RpcNotification {
  jsonrpc?: string;
  method: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  params?: any;
}

interface Pending {
  resolve: (r: RpcResponse) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

interface PendingBatch {
  ids: Set<string | number>;
  resolve: (r: RpcResponse[]) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

/**
 * Every error response any client in this process has seen, so a file can finish with
 * "never an error with code 0, never a stack" over everything it provoked.
 */
export const seenErrors: { method: string; error: RpcErrorObject }[] = [];

const DEFAULT_TIMEOUT_MS = 15_000;

export class RpcLineClient extends EventEmitter {
  readonly socket: net.Socket;
  /** Notifications received, in arrival order. */
  readonly notifications: RpcNotification[] = [];
  /** Responses that matched no pending request (e.g. `id: null` errors), in arrival order. */
  readonly orphans: RpcResponse[] = [];
  /** Lines that were not valid JSON (should never happen). */
  readonly garbage: string[] = [];
  /** Resolves when the socket has closed. */
  readonly closed: Promise<void>;
  isClosed = false;

  #buffer = '';
  #nextId = 1;
  readonly #pending = new Map<string | number, Pending>();
  readonly #pendingMethod = new Map<string | number, string>();
  readonly #batches: PendingBatch[] = [];

  private constructor(socket: net.Socket) {
    super();
    this.socket = socket;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => this.#onData(chunk));
    this.closed = new Promise((resolve) => {
      socket.on('close', () => {
        this.isClosed = true;
        const err = new Error('connection closed');
        for (const [id, p] of this.#pending) {
          clearTimeout(p.timer);
          this.#pending.delete(id);
          p.reject(err);
        }
        for (const b of this.#batches.splice(0)) {
          clearTimeout(b.timer);
          b.reject(err);
        }
        this.emit('close');
        resolve();
      });
    });
    // Errors surface as a closed connection and rejected pending calls.
    socket.on('error', () => undefined);
  }

  /** Connects to the daemon's Unix socket. Rejects if the socket does not accept. */
  static connect(socketPath: string, timeoutMs = 5_000): Promise<RpcLineClient> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(socketPath);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`connect to ${socketPath} timed out`));
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeListener('error', reject);
        resolve(new RpcLineClient(socket));
      });
      socket.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
  }

  /** A fresh numeric request id. */
  newId(): number {
    return this.#nextId++;
  }

  /** Sends a request and resolves with the full response ({result} or {error}). */
  call(method: string, params?: unknown, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<RpcResponse> {
    const id = this.newId();
    const msg: Record<string, unknown> = { jsonrpc: '2.0', id, method };
    if (params !== undefined) msg.params = params;
    return this.callRaw(id, JSON.stringify(msg) + '\n', timeoutMs, method);
  }

  /**
   * Writes `line` (already serialized, newline included by the caller) and resolves with the
   * response carrying `id`. For oversize and hand-escaped requests.
   */
  callRaw(id: string | number, line: string | Buffer, timeoutMs = DEFAULT_TIMEOUT_MS, method = '(raw)'): Promise<RpcResponse> {
    return new Promise((resolve, reject) => {
      if (this.isClosed) {
        reject(new Error('connection closed'));
        return;
      }
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`no response to ${method} (id ${String(id)}) within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, { resolve, reject, timer });
      this.#pendingMethod.set(id, method);
      this.socket.write(line);
    });
  }

  /** Sends a notification (no id); nothing comes back. */
  notify(method: string, params?: unknown): void {
    const msg: Record<string, unknown> = { jsonrpc: '2.0', method };
    if (params !== undefined) msg.params = params;
    this.socket.write(JSON.stringify(msg) + '\n');
  }

  /** Writes raw bytes as they are (for garbage, partial and oversize lines). */
  sendRaw(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** Sends a batch array and resolves with the array the daemon answers. */
  batch(requests: { method: string; params?: unknown }[], timeoutMs = DEFAULT_TIMEOUT_MS): Promise<RpcResponse[]> {
    const msgs = requests.map((r) => {
      const m: Record<string, unknown> = { jsonrpc: '2.0', id: this.newId(), method: r.method };
      if (r.params !== undefined) m.params = r.params;
      return m;
    });
    return this.batchRaw(msgs, timeoutMs);
  }

  /** Sends an arbitrary array of messages; resolves with the array response containing their ids. */
  batchRaw(messages: unknown[], timeoutMs = DEFAULT_TIMEOUT_MS): Promise<RpcResponse[]> {
    const ids = new Set<string | number>();
    for (const m of messages) {
      const id = (m as { id?: unknown } | null)?.id;
      if (typeof id === 'string' || typeof id === 'number') ids.add(id);
    }
    return new Promise((resolve, reject) => {
      const entry: PendingBatch = {
        ids,
        resolve,
        reject,
        timer: setTimeout(() => {
          const i = this.#batches.indexOf(entry);
          if (i >= 0) this.#batches.splice(i, 1);
          reject(new Error(`no batch response within ${timeoutMs} ms`));
        }, timeoutMs),
      };
      this.#batches.push(entry);
      this.socket.write(JSON.stringify(messages) + '\n');
    });
  }

  /** Resolves with the next orphan response (no matching pending id, e.g. `id: null`). */
  nextOrphan(timeoutMs = DEFAULT_TIMEOUT_MS): Promise<RpcResponse> {
    const existing = this.orphans.shift();
    if (existing) return Promise.resolve(existing);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.removeListener('orphan', onOrphan);
        reject(new Error(`no id-less response within ${timeoutMs} ms`));
      }, timeoutMs);
      const onOrphan = (): void => {
        clearTimeout(timer);
        const r = this.orphans.shift();
        if (r) resolve(r);
      };
      this.once('orphan', onOrphan);
    });
  }

  /** `session.hello` with a token. */
  hello(token: string): Promise<RpcResponse> {
    return this.call('session.hello', { token, client: { name: 'yello-integration-tests' } });
  }

  close(): void {
    this.socket.end();
    this.socket.destroy();
  }

  #onData(chunk: string): void {
    this.#buffer += chunk;
    let nl: number;
    while ((nl = this.#buffer.indexOf('\n')) >= 0) {
      const line = this.#buffer.slice(0, nl);
      this.#buffer = this.#buffer.slice(nl + 1);
      if (line.trim() === '') continue;
      this.#onLine(line);
    }
  }

  #onLine(line: string): void {
    let msg: unknown;
    try {
      msg = JSON.parse(line);
    } catch {
      this.garbage.push(line);
      this.emit('garbage', line);
      return;
    }
    if (Array.isArray(msg)) {
      const responses = msg as RpcResponse[];
      for (const r of responses) this.#recordError(r, '(batch)');
      const batch = this.#batches.find((b) => responses.some((r) => r && r.id != null && b.ids.has(r.id))) ?? this.#batches[0];
      if (batch) {
        this.#batches.splice(this.#batches.indexOf(batch), 1);
        clearTimeout(batch.timer);
        batch.resolve(responses);
      } else {
        for (const r of responses) this.#orphan(r);
      }
      return;
    }
    const obj = msg as Record<string, unknown>;
    if (obj && typeof obj === 'object' && typeof obj.method === 'string' && !('id' in obj)) {
      const n = obj as unknown as RpcNotification;
      this.notifications.push(n);
      this.emit('notification', n);
      return;
    }
    const resp = obj as RpcResponse;
    const id = resp?.id;
    if (id != null && this.#pending.has(id)) {
      const p = this.#pending.get(id)!;
      this.#pending.delete(id);
      clearTimeout(p.timer);
      this.#recordError(resp, this.#pendingMethod.get(id) ?? '?');
      this.#pendingMethod.delete(id);
      p.resolve(resp);
      return;
    }
    this.#recordError(resp, '(orphan)');
    this.#orphan(resp);
  }

  #orphan(resp: RpcResponse): void {
    this.orphans.push(resp);
    this.emit('orphan', resp);
  }

  #recordError(resp: RpcResponse | undefined, method: string): void {
    if (resp && typeof resp === 'object' && resp.error) seenErrors.push({ method, error: resp.error });
  }
}

/** Connects and says hello; fails loudly if the hello is not accepted. */
export async function connectAs(socketPath: string, token: string): Promise<RpcLineClient> {
  const c = await RpcLineClient.connect(socketPath);
  const r = await c.hello(token);
  if (!r.result) {
    c.close();
    throw new Error(`session.hello failed: ${JSON.stringify(r.error)}`);
  }
  return c;
}

/** Returns `resp.result`, or throws with the error (for setup steps that must succeed). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function ok(resp: RpcResponse, what = 'call'): any {
  if (resp.error || resp.result === undefined) {
    throw new Error(`${what} failed: ${JSON.stringify(resp.error ?? resp)}`);
  }
  return resp.result;
}

/** Checks that an error object is well-formed per §3: never code 0, never a stack. */
export function errorShapeProblems(e: RpcErrorObject): string[] {
  const problems: string[] = [];
  if (typeof e.code !== 'number' || !Number.isInteger(e.code)) problems.push(`code is not an integer: ${String(e.code)}`);
  if (e.code === 0) problems.push('code 0');
  if (typeof e.message !== 'string') problems.push('message is not a string');
  const text = `${e.message}\n${JSON.stringify(e.data ?? null)}`;
  if (/\n\s*at\s+\S/.test(text) || /\bat\s+[\w.<>]+\s+\(.*:\d+:\d+\)/.test(text) || /\\n\s*at\s+\S/.test(text)) {
    problems.push(`looks like a stack trace: ${text.slice(0, 300)}`);
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// Independent verification of stored chat.message records (§5).

/** base64url without padding. */
export function b64url(buf: Buffer | Uint8Array): string {
  return Buffer.from(buf).toString('base64url');
}

export function sha256b64url(text: string): string {
  return b64url(createHash('sha256').update(Buffer.from(text, 'utf8')).digest());
}

/** §5: base64url(SHA-256(UTF-8("yello.chat.client-message-id.v1\n" + chatId + "\n" + fromAgentId + "\n" + messageId))). */
export function clientMessageIdFor(chatId: string, fromAgentId: string, messageId: string): string {
  return sha256b64url(`yello.chat.client-message-id.v1\n${chatId}\n${fromAgentId}\n${messageId}`);
}

/** §5 signed payload: joined with \n, no trailing newline. */
export function signedPayload(m: { chatId: string; fromAgentId: string; toAgentId: string; createdAt: string; contentSha256: string }): string {
  return ['yello.chat.message.v1', m.chatId, m.fromAgentId, m.toAgentId, m.createdAt, m.contentSha256].join('\n');
}

/** RFC 7638 thumbprint of an EC public JWK: SHA-256 over {"crv","kty","x","y"} in that order. */
export function jwkThumbprint(jwk: { crv: string; kty: string; x: string; y: string }): string {
  const input = JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y });
  return b64url(createHash('sha256').update(input, 'utf8').digest());
}

export interface PublicJwk {
  kty: string;
  crv: string;
  x: string;
  y: string;
  kid?: string;
}

/** Verifies an ES256 (P1363, base64url) signature over `payload` with a public JWK. */
export function verifyEs256(payload: string, signatureB64url: string, jwk: PublicJwk): boolean {
  try {
    const key = createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, format: 'jwk' });
    const sig = Buffer.from(signatureB64url, 'base64url');
    if (sig.length !== 64) return false;
    return cryptoVerify('sha256', Buffer.from(payload, 'utf8'), { key, dsaEncoding: 'ieee-p1363' }, sig);
  } catch {
    return false;
  }
}

/** The message part of §5 plus what the verifier needs. */
export interface SignedMessage {
  chatId: string;
  fromAgentId: string;
  toAgentId: string;
  content: string;
  contentSha256: string;
  clientMessageId?: string;
  signature: { kid: string; alg: string; value: string; createdAt: string };
}

/**
 * Every reason `m` fails §5 against the key set; empty when it verifies. `messageId`, when
 * given, is also checked against clientMessageId.
 */
export function messageProblems(m: SignedMessage, keys: PublicJwk[], messageId?: string): string[] {
  const problems: string[] = [];
  if (!m || typeof m !== 'object') return ['no message'];
  const sig = m.signature;
  if (!sig || typeof sig !== 'object') return ['no signature'];
  if (sig.alg !== 'ES256') problems.push(`alg is ${String(sig.alg)}`);
  if (typeof sig.createdAt !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(sig.createdAt)) {
    problems.push(`signature.createdAt is not RFC 3339 UTC with ms: ${String(sig.createdAt)}`);
  }
  if (typeof m.content !== 'string') problems.push('content is not a string');
  else if (sha256b64url(m.content) !== m.contentSha256) problems.push('contentSha256 does not match content');
  if (!/^[A-Za-z0-9_-]{43}$/.test(String(m.contentSha256))) problems.push('contentSha256 is not unpadded base64url SHA-256');
  if (messageId !== undefined && m.clientMessageId !== clientMessageIdFor(m.chatId, m.fromAgentId, messageId)) {
    problems.push('clientMessageId does not match messageId');
  }
  const key = keys.find((k) => k.kid === sig.kid);
  if (!key) {
    problems.push(`no key with kid ${String(sig.kid)}`);
    return problems;
  }
  if (jwkThumbprint(key) !== sig.kid) problems.push('kid is not the RFC 7638 thumbprint of its key');
  const payload = signedPayload({ ...m, createdAt: sig.createdAt });
  if (!verifyEs256(payload, sig.value, key)) problems.push('signature does not verify');
  return problems;
}

/** Deep search: every value stored under `key` anywhere in `obj`. */
export function findValues(obj: unknown, key: string): unknown[] {
  const out: unknown[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      for (const [k, val] of Object.entries(v)) {
        if (k === key) out.push(val);
        walk(val);
      }
    }
  };
  walk(obj);
  return out;
}

/**
 * The list a list-method returned: the result itself if it is an array, else the array under
 * `key` (the contract leaves some list shapes open, e.g. `agents.list`).
 */
export function listIn(result: unknown, key: string): unknown[] {
  if (Array.isArray(result)) return result;
  const r = result as Record<string, unknown> | null;
  if (r && Array.isArray(r[key])) return r[key] as unknown[];
  if (r) {
    const arrays = Object.values(r).filter(Array.isArray);
    if (arrays.length === 1) return arrays[0] as unknown[];
  }
  throw new Error(`no ${key} list in ${JSON.stringify(result)?.slice(0, 300)}`);
}

// ---------------------------------------------------------------------------------------------
// Setup conveniences shared by the integration files. They go through the same raw wire.

let uniqCounter = 0;
/** A username/operationId-safe unique string (`^[A-Za-z0-9_-]+$`). */
export function uniq(prefix = 'u'): string {
  uniqCounter += 1;
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${uniqCounter}`;
}

/** An agent as `agents.create` returned it, plus a hello'd connection. */
export interface TestAgent {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  agent: any;
  id: string;
  token: string;
  client: RpcLineClient;
}

/** Creates an agent through `admin` and connects as it. */
export async function createAgent(admin: RpcLineClient, socketPath: string, username = uniq('agent')): Promise<TestAgent> {
  const created = ok(await admin.call('agents.create', { username, name: `Agent ${username}` }), 'agents.create');
  const client = await connectAs(socketPath, created.token as string);
  return { agent: created.agent, id: created.agent.id as string, token: created.token as string, client };
}

export interface TestPair {
  a: TestAgent;
  b: TestAgent;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  chat: any;
  chatId: string;
  /** a's outbound stream (`chatId:a.id`). */
  streamA: string;
  /** b's outbound stream (`chatId:b.id`). */
  streamB: string;
}

/** Two agents, grants both ways (unless told otherwise), and their chat opened by a. */
export async function createPair(
  admin: RpcLineClient,
  socketPath: string,
  opts: { grants?: 'both' | 'a-to-b' | 'none' } = {},
): Promise<TestPair> {
  const a = await createAgent(admin, socketPath);
  const b = await createAgent(admin, socketPath);
  const grants = opts.grants ?? 'both';
  if (grants !== 'none') ok(await admin.call('grants.add', { agentId: a.id, peerAgentId: b.id }), 'grants.add');
  if (grants === 'both') ok(await admin.call('grants.add', { agentId: b.id, peerAgentId: a.id }), 'grants.add');
  const opened =
    grants === 'none'
      ? ok(await admin.call('chats.open', { agentAId: a.id, agentBId: b.id }), 'chats.open (admin)')
      : ok(await a.client.call('chats.open', { peerAgentId: b.id }), 'chats.open');
  const chatId = opened.chat.id as string;
  return { a, b, chat: opened.chat, chatId, streamA: `${chatId}:${a.id}`, streamB: `${chatId}:${b.id}` };
}

/** Claims `streamId` as `client` and returns the claim result. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function claim(client: RpcLineClient, streamId: string, replace = false): Promise<any> {
  return ok(await client.call('streams.claim', replace ? { streamId, replace: true, reason: 'test' } : { streamId }), 'streams.claim');
}

/** Reads a whole stream generation from `fromPosition` to its current end. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function readAll(client: RpcLineClient, streamId: string, generation = '1', fromPosition?: string): Promise<any[]> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const state = ok(await client.call('streams.get', { streamId }), 'streams.get');
  let from = fromPosition ?? (state.firstPosition as string);
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const out: any[] = [];
  for (let i = 0; i < 10_000; i++) {
    const r = ok(await client.call('streams.read', { streamId, generation, fromPosition: from }), 'streams.read');
    out.push(...(r.records as unknown[]));
    if ((r.records as unknown[]).length === 0 || BigInt(r.nextPosition) >= BigInt(state.nextPosition)) break;
    from = r.nextPosition as string;
  }
  return out;
}

/** The public keys from `keys.list`. */
export async function fetchKeys(client: RpcLineClient): Promise<PublicJwk[]> {
  return ok(await client.call('keys.list', {}), 'keys.list').keys as PublicJwk[];
}
