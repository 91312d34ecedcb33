// The wire as the tests use it: the shared raw client (wire-client.mjs) typed with the
// contract's result types, setup conveniences that go through it, and the independent
// signature check for stored `chat.message` records (§5), written from the contract with
// node:crypto only. Nothing here runs code from src/ (the import below is types only).

import { createHash, createPublicKey, verify as cryptoVerify } from 'node:crypto';
import type { MethodResults } from '../../src/shared/methods.js';
import type { Agent, Chat, ChatMessage, Checkpoint, ChatReceipt, StoredRecord, WriterFence } from '../../src/shared/types.js';
import { WireClient, type WireError, type WireResponse } from './wire-client.mjs';

export {
  WireClient,
  WireCallError,
  seenErrors,
  type WireError,
  type WireErrorData,
  type WireNotification,
  type WireResponse,
} from './wire-client.mjs';

/** The result type of method `M` (the contract's, for wire answers and the CLI's --json output). */
export type Result<M extends keyof MethodResults> = MethodResults[M];

/** One line of a chat export (`yello chats export`): a stored record, or a checkpoint of the records before it. */
export type ExportLine = Partial<StoredRecord> & { checkpoint?: Checkpoint };

/** A raw wire connection whose results carry the contract's types. */
export type Wire = WireClient<MethodResults>;

/** Connects to the daemon's Unix socket (no hello). Rejects if the socket does not accept. */
export function connectWire(socketPath: string, timeoutMs = 5_000): Promise<Wire> {
  return WireClient.connect<MethodResults>(socketPath, { timeoutMs });
}

/** Connects and says hello; fails loudly if the hello is not accepted. */
export async function connectAs(socketPath: string, token: string): Promise<Wire> {
  const c = await connectWire(socketPath);
  const r = await c.hello(token);
  if (!r.result) {
    c.close();
    throw new Error(`session.hello failed: ${JSON.stringify(r.error)}`);
  }
  return c;
}

/** Returns `resp.result`, or throws with the error (for setup steps that must succeed). */
export function ok<T>(resp: WireResponse<T>, what = 'call'): T {
  if (resp.error || resp.result === undefined) {
    throw new Error(`${what} failed: ${JSON.stringify(resp.error ?? resp)}`);
  }
  return resp.result;
}

// ---------------------------------------------------------------------------------------------
// The parts of a stored record (§5), each failing loudly on a record of another type, or none.

function partOf<K extends 'chat.message' | 'chat.receipt' | 'chat.writer-fence'>(
  r: Partial<StoredRecord> | undefined,
  type: K,
): Extract<StoredRecord['wrapper'], { type: K }> {
  if (r === undefined) throw new Error(`expected a ${type} record, got none`);
  if (r.wrapper?.type !== type)
    throw new Error(`${r.streamId}@${r.generation}#${r.position} is a ${String(r.wrapper?.type)}, not a ${type}`);
  return r.wrapper as Extract<StoredRecord['wrapper'], { type: K }>;
}

/** `wrapper.message` of a stored chat.message record. */
export function messageOf(r: Partial<StoredRecord> | undefined): ChatMessage {
  return partOf(r, 'chat.message').message;
}

/** `wrapper.receipt` of a stored chat.receipt record. */
export function receiptOf(r: Partial<StoredRecord> | undefined): ChatReceipt {
  return partOf(r, 'chat.receipt').receipt;
}

/** `wrapper.fence` of a stored writer fence. */
export function fenceOf(r: Partial<StoredRecord> | undefined): WriterFence {
  return partOf(r, 'chat.writer-fence').fence;
}

/** Checks that an error object is well-formed per §3: never code 0, never a stack. */
export function errorShapeProblems(e: WireError): string[] {
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
export function signedPayload(m: {
  chatId: string;
  fromAgentId: string;
  toAgentId: string;
  createdAt: string;
  contentSha256: string;
}): string {
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

/** A value that came off the wire (or out of a CLI's JSON) before any check: every field may be missing or of another type. */
export type Unchecked<T> = { [K in keyof T]?: unknown };

/** A JSON object (not an array, not null). */
export function isJsonObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * `JSON.stringify(value)` cut to `max` characters, for messages. `JSON.stringify(undefined)` is
 * `undefined` whatever its declared type says, and reads as "undefined" here.
 */
export function jsonPreview(value: unknown, max = 300): string {
  return value === undefined ? 'undefined' : JSON.stringify(value).slice(0, max);
}

/**
 * Every reason `m` fails §5 against the key set; empty when it verifies. `messageId`, when
 * given, is also checked against clientMessageId. `m` is taken as read: the check does not
 * trust it to have the contract's shape.
 */
export function messageProblems(m: Unchecked<SignedMessage> | undefined, keys: PublicJwk[], messageId?: string): string[] {
  const problems: string[] = [];
  if (!isJsonObject(m)) return ['no message'];
  const sig = m.signature;
  if (!isJsonObject(sig)) return ['no signature'];
  if (sig.alg !== 'ES256') problems.push(`alg is ${String(sig.alg)}`);
  const createdAt = sig.createdAt;
  if (typeof createdAt !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(createdAt)) {
    problems.push(`signature.createdAt is not RFC 3339 UTC with ms: ${String(createdAt)}`);
  }
  if (typeof m.content !== 'string') problems.push('content is not a string');
  else if (sha256b64url(m.content) !== m.contentSha256) problems.push('contentSha256 does not match content');
  const { chatId, fromAgentId, toAgentId, contentSha256 } = m;
  if (typeof contentSha256 !== 'string' || !/^[A-Za-z0-9_-]{43}$/.test(contentSha256)) {
    problems.push('contentSha256 is not unpadded base64url SHA-256');
  }
  if (typeof chatId !== 'string' || typeof fromAgentId !== 'string' || typeof toAgentId !== 'string') {
    problems.push('chatId, fromAgentId or toAgentId is not a string');
    return problems;
  }
  if (messageId !== undefined && m.clientMessageId !== clientMessageIdFor(chatId, fromAgentId, messageId)) {
    problems.push('clientMessageId does not match messageId');
  }
  const key = keys.find((k) => k.kid === sig.kid);
  if (!key) {
    problems.push(`no key with kid ${String(sig.kid)}`);
    return problems;
  }
  if (jwkThumbprint(key) !== sig.kid) problems.push('kid is not the RFC 7638 thumbprint of its key');
  if (typeof createdAt !== 'string' || typeof contentSha256 !== 'string' || typeof sig.value !== 'string') {
    problems.push('signature does not verify');
    return problems;
  }
  const payload = signedPayload({ chatId, fromAgentId, toAgentId, createdAt, contentSha256 });
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
  throw new Error(`no ${key} list in ${jsonPreview(result)}`);
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
  agent: Agent;
  id: string;
  token: string;
  client: Wire;
}

/** Creates an agent through `admin` and connects as it. */
export async function createAgent(admin: Wire, socketPath: string, username = uniq('agent')): Promise<TestAgent> {
  const created = ok(await admin.call('agents.create', { username, name: `Agent ${username}` }), 'agents.create');
  const client = await connectAs(socketPath, created.token);
  return { agent: created.agent, id: created.agent.id, token: created.token, client };
}

export interface TestPair {
  a: TestAgent;
  b: TestAgent;
  chat: Chat;
  chatId: string;
  /** a's outbound stream (`chatId:a.id`). */
  streamA: string;
  /** b's outbound stream (`chatId:b.id`). */
  streamB: string;
}

/** Two agents, grants both ways (unless told otherwise), and their chat opened by a. */
export async function createPair(admin: Wire, socketPath: string, opts: { grants?: 'both' | 'a-to-b' | 'none' } = {}): Promise<TestPair> {
  const a = await createAgent(admin, socketPath);
  const b = await createAgent(admin, socketPath);
  const grants = opts.grants ?? 'both';
  if (grants !== 'none') ok(await admin.call('grants.add', { agentId: a.id, peerAgentId: b.id }), 'grants.add');
  if (grants === 'both') ok(await admin.call('grants.add', { agentId: b.id, peerAgentId: a.id }), 'grants.add');
  const opened =
    grants === 'none'
      ? ok(await admin.call('chats.open', { agentAId: a.id, agentBId: b.id }), 'chats.open (admin)')
      : ok(await a.client.call('chats.open', { peerAgentId: b.id }), 'chats.open');
  const chatId = opened.chat.id;
  return { a, b, chat: opened.chat, chatId, streamA: `${chatId}:${a.id}`, streamB: `${chatId}:${b.id}` };
}

/** Claims `streamId` as `client` and returns the claim result. */
export async function claim(client: Wire, streamId: string, replace = false): Promise<MethodResults['streams.claim']> {
  return ok(await client.call('streams.claim', replace ? { streamId, replace: true, reason: 'test' } : { streamId }), 'streams.claim');
}

/** Reads a whole stream generation from `fromPosition` to its current end. */
export async function readAll(client: Wire, streamId: string, generation = '1', fromPosition?: string): Promise<StoredRecord[]> {
  const state = ok(await client.call('streams.get', { streamId }), 'streams.get');
  let from = fromPosition ?? state.firstPosition;
  const out: StoredRecord[] = [];
  for (let i = 0; i < 10_000; i++) {
    const r = ok(await client.call('streams.read', { streamId, generation, fromPosition: from }), 'streams.read');
    out.push(...r.records);
    if (r.records.length === 0 || BigInt(r.nextPosition) >= BigInt(state.nextPosition)) break;
    from = r.nextPosition;
  }
  return out;
}

/** The public keys from `keys.list`. */
export async function fetchKeys(client: Wire): Promise<PublicJwk[]> {
  return ok(await client.call('keys.list', {}), 'keys.list').keys;
}
