import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { readOrCreate } from './runtime/files.js';
import { dataDirEntries, prepareDataDir, removeCreated, removeEmptyDirsCreated } from './runtime/data-dir.js';
import { removeLockHolder, writeLockHolder } from './runtime/lock-info.js';
import type { Logger } from 'pino';
import { createLogger } from './runtime/log.js';
import type { DaemonConfig } from './runtime/config.js';
import { Integrity } from './store/integrity.js';
import { startupFailure } from './runtime/startup-errors.js';
import { isLevelSelection, openBackend, type OpenedBackend } from './store/backend/open-backend.js';
import { publishKeys } from './crypto/key-rows.js';
import { Directory } from './directory/directory.js';
import { Signer } from './crypto/signer.js';
import { SignBatcher } from './crypto/sign-batcher.js';
import { defaultSignWorkers, SignPool } from './crypto/sign-pool.js';
import { TokenCodec } from './crypto/token-codec.js';
import { StreamStore } from './streams/stream-store.js';
import { ChatReader } from './streams/chat-reader.js';
import { RetentionRunner } from './streams/retention-policy.js';
import { Subscriptions } from './streams/subscriptions.js';
import { HelloLimiter } from './rpc/hello-limiter.js';
import { Audit } from './rpc/audit.js';
import {
  DEFAULT_HELLO_TIMEOUT_MS,
  DEFAULT_MAX_PENDING_HELLOS,
  DEFAULT_MAX_SESSIONS_PER_AGENT,
  DEFAULT_MAX_OUTPUT_BYTES,
  DEFAULT_MAX_UNSENT_BYTES,
  DEFAULT_QUOTAS,
} from './limits.js';
import { Quotas } from './streams/quotas.js';
import { OutputPool } from './rpc/output-pool.js';
import { RpcServer } from './rpc/rpc-server.js';
import { createHandlers } from './rpc/rpc-methods.js';
import { SocketServer, prepareSocketPath } from './rpc/socket-server.js';
import { MAX_APPEND_REQUEST_BYTES } from '../shared/paths.js';
import { newToken } from './crypto/tokens.js';
import { VERSION } from './runtime/version.js';
import { errorMessage } from './runtime/error-fields.js';
import { monotonicMs } from './runtime/clock.js';
import type { MetricsEndpoint } from './runtime/metrics-http.js';

/** A running daemon. */
export interface RunningDaemon {
  /** Graceful stop: stop accepting, settle in-flight writes, close the store. */
  stop(): Promise<void>;
}

/** What the daemon's host gives it besides its configuration. */
export interface DaemonHost {
  /** Where the daemon logs (default: pino JSON on stdout at `config.logLevel`). */
  log?: Logger;
}

/**
 * Start order matters (§2): lock the store (on PostgreSQL: the data dir) first, and only then
 * touch the socket, so a second daemon on the same data dir exits without disturbing the first one's socket. Every failure
 * before ready is one line and a distinct exit code (`startup-errors.ts`). Nothing here is
 * process-wide (signal and error handlers, exit: src/cli/run-daemon.ts), so one process can run
 * several daemons, one after another or at once (the tests do).
 */
export async function startDaemon(config: DaemonConfig, host: DaemonHost = {}): Promise<RunningDaemon> {
  const log = host.log ?? createLogger(config.logLevel);
  // prom-client and its default collectors are slow to load (0.5 s on a busy 2-core machine):
  // loaded while LevelDB opens rather than before it. Awaited below; the catch only keeps a
  // failed start from also reporting an unhandled rejection.
  const metricsModule = import('./runtime/metrics.js');
  metricsModule.catch(() => undefined);
  const existedBefore = dataDirEntries(config.dataDir);
  const selection = { store: config.store ?? null, passwordFile: config.storePasswordFile ?? null };
  prepareDataDir(config.dataDir, isLevelSelection(selection.store));
  let backend: OpenedBackend;
  try {
    backend = await openBackend(config.dataDir, selection, log, {
      failSyncFile: config.faultFailSyncFile ?? null,
      pgAnswerDeadlineMs: config.pgAnswerDeadlineMs,
    });
  } catch (err) {
    // Not ours to clean beyond the empty directories this start made: another daemon may be
    // filling the data dir right now (it holds the lock).
    removeEmptyDirsCreated(config.dataDir, existedBefore);
    throw err;
  }
  const port = backend.port;
  const lockDir = join(config.dataDir, backend.lockEntry);
  try {
    try {
      writeLockHolder(lockDir, config.socketPath ?? 'systemd:fd3');
    } catch (err) {
      // Advisory only (it names this daemon in a second one's lock error): never a reason not to start.
      log.warn({ err: { message: errorMessage(err) } }, 'could not record the lock holder');
    }
    // The port is a MarkStore: it has the integrity port and knows whether writes still pass.
    const integrity = new Integrity(port, log);
    let adminToken: string;
    let secret: Buffer;
    let signer: Signer;
    try {
      await integrity.load();
      await backend.level?.applyRecoveryReport(integrity, log);
      adminToken = readOrCreate(join(config.dataDir, 'admin.token'), () => newToken('yello_admin_'));
      secret = Buffer.from(
        readOrCreate(join(config.dataDir, 'secret.key'), () => randomBytes(32).toString('base64url')),
        'base64url',
      );
      signer = new Signer(join(config.dataDir, 'keys'));
    } catch (err) {
      throw startupFailure(err, `prepare the data dir ${config.dataDir}`);
    }
    try {
      // keys.list on every daemon of the deployment lists this daemon's keys too.
      await publishKeys(port.keys, signer);
    } catch (err) {
      throw startupFailure(err, 'publish the signing keys to the store');
    }
    const level = backend.level;
    // On a shared store every daemon seals under the deployment's secret, so a cursor or batch
    // id from one daemon is accepted by the others (docs/design/deployment-secret.md).
    const codec = port.deploymentSecret ? TokenCodec.forDeployment(port.deploymentSecret) : new TokenCodec(secret);
    const directory = new Directory(port, codec, adminToken, config.policy);
    const damage = await directory.checkDamage();
    for (const [keys, what, answer] of [
      [damage.tokenIndex, 'token index', 'an unknown token'],
      [damage.grants, 'grant', 'a missing grant'],
    ] as const) {
      if (keys.length > 0) log.error({ keys }, `${what} keys fail their checksum: ${answer} is answered STORAGE_FAILURE; run yello doctor`);
    }
    const workers = config.signWorkers ?? defaultSignWorkers();
    const batcher = new SignBatcher(signer, { pool: workers > 0 ? new SignPool(signer, log, workers) : null });
    const streams = new StreamStore(port, directory, signer, codec, integrity, batcher);
    const reader = new ChatReader(streams, directory, codec);
    const subscriptions = new Subscriptions(streams, reader, directory, integrity, log);
    // A chat another daemon created is told to this daemon's chats.watch as a local one is.
    backend.onChatsLearned?.((chatIds) => {
      for (const id of chatIds)
        try {
          subscriptions.opened(directory.chat(id));
        } catch (err) {
          log.warn({ err: { message: errorMessage(err) }, chatId: id }, 'telling chats.watch of a chat another daemon created failed');
        }
    });
    // Another daemon's commit wakes this one's long polls and followers (PostgreSQL's notices).
    const headChanges = backend.headChanges;
    const relay = headChanges
      ? (async () => {
          for await (const n of headChanges) streams.moved(n.streamId);
        })().catch((err: unknown) => {
          log.error({ err: { message: errorMessage(err) } }, 'relaying head changes of other daemons failed');
        })
      : null;
    const helloLimiter = new HelloLimiter();
    const quotas = new Quotas({ ...DEFAULT_QUOTAS, ...config.quotas }, port);
    const audit = new Audit(log);
    const metrics = new (await metricsModule).Metrics(VERSION);
    port.onCommit((writes, seconds) => {
      metrics.committed(writes, seconds);
    });
    quotas.onHit((quota) => {
      metrics.quotaHit(quota);
    });
    const handlers = createHandlers({
      version: VERSION,
      dataDir: config.dataDir,
      startedAt: monotonicMs(),
      maxLineBytes: config.maxLineBytes,
      maxAppendRequestBytes: MAX_APPEND_REQUEST_BYTES,
      store: port,
      storeInfo: backend.info,
      check: level ? (mark) => level.check(integrity, signer, mark) : null,
      directory,
      streams,
      reader,
      subscriptions,
      signer,
      helloLimiter,
      quotas,
      integrity,
      audit,
      walIncidents: () => backend.level?.walIncidents() ?? [],
      metrics,
    });
    const pool = new OutputPool(config.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES);
    const rpc = new RpcServer(
      handlers,
      log,
      (caller) => directory.stillValid(caller),
      (error) => {
        metrics.refused(error);
      },
      // NOT_FOUND of an agent, chat or stream, on a store other daemons write too: read again first.
      (error) => directory.confirmRefusal(String(error.details.kind), String(error.details.id)),
    );
    const server = new SocketServer(rpc, log, {
      maxLineBytes: config.maxLineBytes,
      maxConnections: config.maxConnections,
      maxPendingHellos: config.maxPendingHellos ?? DEFAULT_MAX_PENDING_HELLOS,
      maxSessionsPerAgent: config.maxSessionsPerAgent ?? DEFAULT_MAX_SESSIONS_PER_AGENT,
      helloTimeoutMs: config.helloTimeoutMs ?? DEFAULT_HELLO_TIMEOUT_MS,
      maxUnsentBytes: config.maxUnsentBytes ?? DEFAULT_MAX_UNSENT_BYTES,
      pool,
      audit,
      onConnection: (c) => {
        c.onClose(() => {
          helloLimiter.forget(c.id);
        });
      },
      onRefused: (reason) => {
        metrics.connectionRefused(reason);
      },
    });
    metrics.observe({
      counts: () => port.counts(),
      commits: () => port.stats,
      readOnly: () => port.readOnly,
      corruptMarks: () => integrity.list().length,
      walIncidents: () => backend.level?.walIncidents().length ?? 0,
      followers: () => subscriptions.count,
      connections: () => server.connectionsByRole(),
    });
    const metricsEndpoint: MetricsEndpoint | null = config.metricsListen
      ? await (await import('./runtime/metrics-http.js')).listenMetrics(metrics, config.metricsListen, log, audit, config.metricsIdleMs)
      : null;
    try {
      if (config.socketPath === null) {
        await server.listenFd(3);
      } else {
        await prepareSocketPath(config.socketPath, log);
        await server.listenPath(config.socketPath, config.socketMode);
      }
    } catch (err) {
      await metricsEndpoint?.close();
      throw startupFailure(err, `listen on ${config.socketPath ?? 'the socket passed by systemd'}`);
    }
    if (metricsEndpoint) log.info({ url: metricsEndpoint.url }, 'metrics endpoint listening');
    log.info(
      {
        socket: config.socketPath ?? 'systemd:fd3',
        dataDir: config.dataDir,
        store: backend.describe,
        kid: signer.kid,
        policy: config.policy,
        version: VERSION,
      },
      'yellod ready',
    );
    // Every head is checked against its records on first use; this sweep does the rest in the
    // background so `yello status` lists what is corrupt without waiting for traffic.
    const sweep = streams.reconcileAll().catch((err: unknown) => {
      log.error({ err: { message: errorMessage(err) } }, 'head check sweep failed');
    });
    const retention = RetentionRunner.enabled(config.retention) ? streams.retentionRunner(config.retention, log) : null;
    retention?.start();

    let stopping: Promise<void> | null = null;
    return {
      stop() {
        stopping ??= (async () => {
          log.info('stopping');
          server.stopAccepting();
          await metricsEndpoint?.close();
          subscriptions.endAll();
          await sweep;
          await retention?.stop();
          // Queued writes wait for their signatures: sign what is waiting, then close the store.
          await batcher.close();
          await port.close();
          await relay;
          removeLockHolder(lockDir);
          await backend.release();
          server.closeConnections();
          pool.close();
          log.info('stopped');
        })();
        return stopping;
      },
    };
  } catch (err) {
    // A start that fails (another daemon on the socket, say) leaves no half-made data dir:
    // what this start created (keys, admin token, a new store) goes.
    removeLockHolder(lockDir);
    await removeCreated(
      config.dataDir,
      existedBefore,
      backend.lockEntry,
      async () => {
        await port.close().catch(() => {});
        await backend.release();
      },
      log,
    );
    throw err;
  }
}
