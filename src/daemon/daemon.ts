import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ensureDir, readOrCreate } from './files.js';
import { createLogger } from './log.js';
import type { DaemonConfig } from './config.js';
import { Storage } from './storage.js';
import { Counters } from './counters.js';
import { Directory } from './directory.js';
import { Signer } from './signer.js';
import { TokenCodec } from './batch-codec.js';
import { StreamStore } from './stream-store.js';
import { ChatReader } from './chat-reader.js';
import { Subscriptions } from './subscriptions.js';
import { HelloLimiter } from './hello-limiter.js';
import { RpcServer } from './rpc-server.js';
import { createHandlers } from './rpc-methods.js';
import { EXIT_STORE_CORRUPT, EXIT_STORE_LOCKED, SocketServer, StartupError, prepareSocketPath } from './socket-server.js';
import { MAX_APPEND_REQUEST_BYTES } from '../shared/paths.js';
import { newToken } from './tokens.js';
import { VERSION } from './version.js';

/** A running daemon. */
export interface RunningDaemon {
  /** Graceful stop: stop accepting, settle in-flight writes, close LevelDB. */
  stop(): Promise<void>;
}

/**
 * Start order matters (§2): lock the store first, and only then touch the socket, so a second
 * daemon on the same data dir exits without disturbing the first one's socket.
 */
export async function startDaemon(config: DaemonConfig): Promise<RunningDaemon> {
  const log = createLogger(config.logLevel);
  ensureDir(config.dataDir, 0o700);
  ensureDir(join(config.dataDir, 'db'), 0o700);
  let storage: Storage;
  try {
    storage = await Storage.open(join(config.dataDir, 'db'), log, { injectFailure: config.faultFailSyncFile ? () => existsSync(config.faultFailSyncFile!) : null });
  } catch (err) {
    const code = (err as { code?: string; cause?: { code?: string } }).cause?.code ?? (err as { code?: string }).code;
    if (code === 'LEVEL_LOCKED') throw new StartupError(`the store ${join(config.dataDir, 'db')} is locked by another daemon`, EXIT_STORE_LOCKED);
    if (code === 'LEVEL_CORRUPTION') throw new StartupError(`the store ${join(config.dataDir, 'db')} is corrupt (LEVEL_CORRUPTION); restore it from a backup or repair it`, EXIT_STORE_CORRUPT);
    throw err;
  }
  try {
    const adminToken = readOrCreate(join(config.dataDir, 'admin.token'), () => newToken('yello_admin_'));
    const secret = Buffer.from(readOrCreate(join(config.dataDir, 'secret.key'), () => randomBytes(32).toString('base64url')), 'base64url');
    const signer = new Signer(join(config.dataDir, 'keys'));
    const counters = Counters.load(storage);
    const codec = new TokenCodec(secret);
    const directory = new Directory(storage, counters, codec, adminToken, config.policy);
    const streams = new StreamStore(storage, directory, signer, codec, counters);
    const reader = new ChatReader(streams, directory, codec);
    const subscriptions = new Subscriptions(streams, reader, directory, log);
    const helloLimiter = new HelloLimiter();
    const handlers = createHandlers({
      version: VERSION, startedAt: Date.now(), maxLineBytes: config.maxLineBytes, maxAppendRequestBytes: MAX_APPEND_REQUEST_BYTES,
      storage, directory, streams, reader, subscriptions, signer, counters, helloLimiter,
    });
    const rpc = new RpcServer(handlers, log, (caller) => directory.stillValid(caller));
    const server = new SocketServer(rpc, log, {
      maxLineBytes: config.maxLineBytes,
      maxConnections: config.maxConnections,
      onConnection: (c) => c.onClose(() => helloLimiter.forget(c.id)),
    });
    if (config.socketPath === null) {
      await server.listenFd(3);
    } else {
      await prepareSocketPath(config.socketPath, log);
      await server.listenPath(config.socketPath, config.socketMode);
    }
    log.info({ socket: config.socketPath ?? 'systemd:fd3', dataDir: config.dataDir, kid: signer.kid, policy: config.policy, version: VERSION }, 'yellod ready');

    let stopping: Promise<void> | null = null;
    return {
      stop() {
        stopping ??= (async () => {
          log.info('stopping');
          server.stopAccepting();
          subscriptions.endAll();
          await storage.close();
          server.closeConnections();
          log.info('stopped');
        })();
        return stopping;
      },
    };
  } catch (err) {
    await storage.close().catch(() => {});
    throw err;
  }
}
