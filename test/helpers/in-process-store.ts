// The daemon's storage and services built in this process on a real LevelDB in a temp dir, with
// no socket: for unit tests that inject faults between the layers (Storage, StreamStore,
// Subscriptions). Integration tests use the real daemon process instead.

import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { pino } from 'pino';
import { TokenCodec } from '../../src/daemon/crypto/token-codec.js';
import type { Caller } from '../../src/daemon/caller.js';
import { ChatReader } from '../../src/daemon/streams/chat-reader.js';
import { Counters } from '../../src/daemon/store/leveldb/counters.js';
import { Directory } from '../../src/daemon/directory/directory.js';
import { Integrity } from '../../src/daemon/store/integrity.js';
import { LevelStore, levelMarkStore } from '../../src/daemon/store/leveldb/level-store.js';
import { applyRecoveryReport } from '../../src/daemon/store/leveldb/recovery-check.js';
import type { ConnectionHandle } from '../../src/daemon/rpc/rpc-server.js';
import { Signer } from '../../src/daemon/crypto/signer.js';
import { SignBatcher } from '../../src/daemon/crypto/sign-batcher.js';
import { openStore, type OpenedStore } from '../../src/daemon/store/leveldb/store-open.js';
import { StreamStore } from '../../src/daemon/streams/stream-store.js';
import { Subscriptions } from '../../src/daemon/streams/subscriptions.js';
import { makeTempDir } from './daemon-process.js';

/** A ConnectionHandle that records what it is sent. */
export class RecordingConnection implements ConnectionHandle {
  static #next = 1;
  readonly id = RecordingConnection.#next++;
  readonly notifications: Array<{ method: string; params: unknown }> = [];
  congested = false;
  #drain: Array<() => void> = [];
  setCaller(): void {}
  notify(method: string, params: unknown): void {
    this.notifications.push({ method, params });
  }
  onClose(): void {}
  onHangUp(): void {}
  onDrain(listener: () => void): void {
    this.#drain.push(listener);
  }
  /** Clear congestion and run drain listeners. */
  drain(): void {
    this.congested = false;
    for (const l of this.#drain.splice(0)) l();
  }
}

/** Services over a real store; `close()` removes the temp dir. */
export interface InProcessStore {
  dir: string;
  store: OpenedStore;
  /** The storage port over `store`. */
  port: LevelStore;
  integrity: Integrity;
  /** The codec that seals this store's cursors and batch ids (a guard seals malformed ones with it). */
  codec: TokenCodec;
  directory: Directory;
  streams: StreamStore;
  reader: ChatReader;
  subscriptions: Subscriptions;
  close(): Promise<void>;
}

export const silentLog = pino({ level: 'silent' });

/** Open (or reopen) a store in `dir` and build the services the way the daemon does. */
export async function openInProcess(
  dir?: string,
  options: { injectFailure?: () => boolean; signBatcher?: (signer: Signer) => SignBatcher } = {},
): Promise<InProcessStore> {
  const root = dir ?? (await makeTempDir('yl-ip-'));
  mkdirSync(path.join(root, 'db'), { recursive: true });
  const store = await openStore(root, silentLog, { injectFailure: options.injectFailure ?? null });
  const integrity = new Integrity(levelMarkStore(store.storage), silentLog);
  await integrity.load();
  await applyRecoveryReport(store, integrity, silentLog);
  const port = new LevelStore(store.storage, await Counters.load(store.storage, silentLog));
  const codec = new TokenCodec(randomBytes(32));
  const directory = new Directory(port, codec, 'admin-token', 'open');
  const signer = new Signer(path.join(root, 'keys'));
  const batcher = options.signBatcher?.(signer) ?? new SignBatcher(signer);
  const streams = new StreamStore(port, directory, signer, codec, integrity, batcher);
  const reader = new ChatReader(streams, directory, codec);
  const subscriptions = new Subscriptions(streams, reader, directory, integrity, silentLog);
  return {
    dir: root,
    store,
    port,
    integrity,
    codec,
    directory,
    streams,
    reader,
    subscriptions,
    async close() {
      subscriptions.endAll();
      await store.storage.close();
      if (!dir) rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Two agents, their chat, and a claimed outbound stream for the first. */
export async function chatWithWriter(
  s: InProcessStore,
): Promise<{ alice: Caller; bob: Caller; chatId: string; streamId: string; token: string }> {
  const a = await s.directory.createAgent(`alice${randomBytes(3).toString('hex')}`, 'Alice', undefined);
  const b = await s.directory.createAgent(`bob${randomBytes(3).toString('hex')}`, 'Bob', undefined);
  await s.directory.setPolicy(a.agent.id, 'off');
  const alice = s.directory.authenticate(a.token)!;
  const bob = s.directory.authenticate(b.token)!;
  const { chat } = await s.directory.openChat(alice, a.agent.id, b.agent.id);
  const streamId = `${chat.id}:${a.agent.id}`;
  const claim = await s.streams.claim(alice, { streamId, replace: false });
  return { alice, bob, chatId: chat.id, streamId, token: claim.coordinatorToken };
}

/** Append `n` one-message operations through the real append path. */
export async function appendMessages(
  s: InProcessStore,
  w: { alice: Caller; streamId: string; token: string },
  n: number,
  prefix = 'm',
): Promise<void> {
  for (let i = 0; i < n; i++) {
    const head = s.streams.get(w.alice, w.streamId);
    await s.streams.append(w.alice, {
      streamId: w.streamId,
      coordinatorToken: w.token,
      generation: Number(head.generation),
      expectedPosition: Number(head.nextPosition),
      operationId: `op-${prefix}-${i}-${randomBytes(3).toString('hex')}`,
      records: [{ type: 'chat.message', messageId: `${prefix}-${i}`, content: `${prefix} ${i}` }],
    });
  }
}

/** Append one operation of `size` messages (`<prefix>-<k>`) through the real append path; its operationId. */
export async function appendOperation(
  s: InProcessStore,
  w: { alice: Caller; streamId: string; token: string },
  size: number,
  prefix = 'm',
): Promise<string> {
  const head = s.streams.get(w.alice, w.streamId);
  const operationId = `op-${prefix}-${randomBytes(3).toString('hex')}`;
  await s.streams.append(w.alice, {
    streamId: w.streamId,
    coordinatorToken: w.token,
    generation: Number(head.generation),
    expectedPosition: Number(head.nextPosition),
    operationId,
    records: Array.from({ length: size }, (_, k) => ({
      type: 'chat.message' as const,
      messageId: `${prefix}-${k}`,
      content: `${prefix} ${k}`,
    })),
  });
  return operationId;
}
