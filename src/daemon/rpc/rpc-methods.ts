import { errors } from '../../shared/errors.js';
import { parseDecimal } from '../../shared/ids.js';
import { untrustworthy } from '../store/integrity.js';
import type { Audit } from './audit.js';
import type { Caller } from '../caller.js';
import { streamCheckpoint } from '../streams/checkpoints.js';
import { chatStreamIds } from '../directory/chats.js';
import type { Directory } from '../directory/directory.js';
import type { HelloLimiter } from './hello-limiter.js';
import type { Quotas } from '../streams/quotas.js';
import type { Integrity } from '../store/integrity.js';
import type { WalIncident } from '../store/port/values.js';
import type { CallContext, Handlers } from './rpc-server.js';
import type { Signer } from '../crypto/signer.js';
import type { StorePort } from '../store/port/store-port.js';
import type { StreamStore } from '../streams/stream-store.js';
import type { ChatReader } from '../streams/chat-reader.js';
import type { Subscriptions } from '../streams/subscriptions.js';
import { buildOpenRpc } from '../../shared/openrpc.js';
import type { StoreInfo } from '../../shared/results.js';
import { listKeys, publishKeys } from '../crypto/key-rows.js';
import type { DoctorReport } from '../../shared/types.js';
import { PAGE_BYTES } from '../limits.js';
import { LIST_LIMIT } from '../directory/list-cursor.js';
import { monotonicMs } from '../runtime/clock.js';
import type { Metrics } from '../runtime/metrics.js';

/** Everything the handlers use. */
export interface Services {
  version: string;
  /** The data dir: the keys and secrets a backup copies beside the store. */
  dataDir: string;
  /** When the daemon started, on the monotonic clock (`clock.ts`). */
  startedAt: number;
  maxLineBytes: number;
  maxAppendRequestBytes: number;
  store: StorePort;
  /** Which backend, for `daemon.status` (a URL redacted). */
  storeInfo: StoreInfo;
  /** `daemon.check`: the engine's own full check of the store (LevelDB: store/leveldb/doctor.ts); null: none (UNSUPPORTED). */
  check: ((mark: boolean) => Promise<DoctorReport>) | null;
  directory: Directory;
  streams: StreamStore;
  reader: ChatReader;
  subscriptions: Subscriptions;
  signer: Signer;
  helloLimiter: HelloLimiter;
  quotas: Quotas;
  integrity: Integrity;
  audit: Audit;
  walIncidents: () => Array<Pick<WalIncident, 'detectedAt' | 'bytes' | 'streams' | 'guardDamaged'>>;
  metrics: Metrics;
}

const agentIdOf = (caller: Caller) => (caller.role === 'agent' ? caller.agentId : null);
/** The page budget of this request (PAGE_BYTES outside a real connection). */
const pageBytes = (ctx: CallContext) => () => ctx.pageBytes?.() ?? PAGE_BYTES;
const peerOf = (ctx: CallContext) => ctx.connection.peer ?? { conn: ctx.connection.id, socketInode: null };

/**
 * The handlers: thin adapters from validated wire params to services. This is where wire
 * becomes domain: decimal positions and generations turn into numbers and defaults are
 * applied, so the services below take plain typed values (src/daemon/requests.ts).
 */
export function createHandlers(s: Services): Handlers {
  return {
    'session.hello': (p, _caller, ctx) => {
      const connId = ctx.connection.id;
      s.helloLimiter.check(connId);
      const welcome = (caller: Caller) => {
        s.helloLimiter.succeeded(connId);
        ctx.connection.setCaller(caller);
        return {
          role: caller.role,
          agentId: caller.role === 'agent' ? caller.agentId : null,
          protocol: 'yello.chat.v1' as const,
          daemon: { version: s.version },
          limits: { maxAppendRequestBytes: s.maxAppendRequestBytes, maxLineBytes: s.maxLineBytes },
          signing: { kid: s.signer.kid, alg: 'ES256' as const },
        };
      };
      const refuse = () => {
        const floodWait = s.helloLimiter.failed(connId);
        s.audit.security('session.hello.failed', { ...peerOf(ctx) });
        // An unknown token may be a valid one whose index entry was damaged: say so, not "unknown".
        const damaged = s.directory.tokenIndexDamage;
        if (damaged !== null) {
          throw untrustworthy(damaged, 'the token index is damaged, so an unknown token cannot be told from a valid one');
        }
        // Failures across the daemon are over their rate: this failing caller is told to wait.
        if (floodWait !== null) throw errors.rateLimited(floodWait, 'failed session.hello attempts across the daemon');
        throw errors.unauthenticated('unknown, rotated or disabled token');
      };
      // Known here: the session starts at once (calls sent right behind the hello find it). On a
      // shared store every call of it is confirmed against the store before it runs, so a token
      // rotated or disabled through another daemon, unheard here yet, opens a session that can
      // do nothing: its first call is UNAUTHENTICATED.
      const known = s.directory.authenticate(p.token);
      if (known) return welcome(known);
      // Unknown here: a token made or rotated through another daemon of a shared store, unheard yet, is read from it first.
      return s.directory.authenticateConfirmed(p.token).then((caller) => (caller ? welcome(caller) : refuse()));
    },
    'daemon.status': () => ({
      version: s.version,
      uptimeMs: Math.round(monotonicMs() - s.startedAt),
      counts: s.store.counts(),
      storage: s.store.readOnly ? 'read-only' : 'ok',
      commits: { ...s.store.stats },
      kid: s.signer.kid,
      policy: s.directory.policy,
      store: s.storeInfo,
      integrity: {
        corruptStreams: s.integrity.list(),
        walIncidents: s
          .walIncidents()
          .map((i) => ({ detectedAt: i.detectedAt, bytes: i.bytes, streams: i.streams, guardDamaged: i.guardDamaged })),
      },
    }),
    'daemon.metrics': () => s.metrics.scrape(),
    'daemon.check': (p) => {
      if (s.check === null)
        throw errors.storageFailure(
          null,
          'UNSUPPORTED',
          "daemon.check scans a LevelDB store, and this daemon stores in PostgreSQL: every stream head is still checked against its records at start and on first use; check the database with PostgreSQL's own tools (amcheck, pg_checksums); nothing was written",
        );
      return s.check(p.mark !== false);
    },
    'daemon.backup': async (p, caller, ctx) => {
      const manifest = await s.store.backup(p.path, { dataDir: s.dataDir, daemonVersion: s.version });
      s.audit.action('daemon.backup', caller, peerOf(ctx), { path: p.path, entries: manifest.entries });
      return manifest;
    },
    'keys.list': () => listKeys(s.store.keys, s.signer),
    'keys.rotate': async (_p, caller, ctx) => {
      // A daemon that turned read-only after a failed write changes nothing on disk, keys included.
      s.store.assertWritable();
      const kid = s.signer.rotate();
      // The other daemons list the new key (and this one's retirement) once it is in the store.
      await publishKeys(s.store.keys, s.signer);
      s.audit.action('keys.rotate', caller, peerOf(ctx), { kid });
      return { kid };
    },

    'agents.create': async (p, caller, ctx) => {
      const r = await s.directory.createAgent(p.username, p.name, p.image);
      s.audit.action('agents.create', caller, peerOf(ctx), { target: r.agent.id, username: r.agent.username });
      return r;
    },
    'agents.list': (p) => s.directory.listAgents(p.cursor, p.limit ?? LIST_LIMIT),
    'agents.get': (p) => {
      if (p.agentId !== undefined) return { agent: s.directory.agent(p.agentId) };
      if (p.username !== undefined) return { agent: s.directory.agentByUsername(p.username) };
      // Unreachable: the params schema admits exactly one of the two.
      throw errors.invalidParams('', 'give exactly one of agentId or username');
    },
    'agents.rotateToken': async (p, caller, ctx) => {
      const r = await s.directory.rotateToken(p.agentId);
      s.audit.action('agents.rotateToken', caller, peerOf(ctx), { target: p.agentId });
      return r;
    },
    'agents.disable': async (p, caller, ctx) => {
      const agent = await s.directory.disableAgent(p.agentId);
      s.audit.action('agents.disable', caller, peerOf(ctx), { target: p.agentId });
      return { agent };
    },
    'agents.setPolicy': async (p, caller, ctx) => {
      const agent = await s.directory.setPolicy(p.agentId, p.pii);
      s.audit.action('agents.setPolicy', caller, peerOf(ctx), { target: p.agentId, pii: p.pii });
      return { agent };
    },

    'grants.add': async (p, caller, ctx) => {
      const grant = await s.directory.addGrant(p.agentId, p.peerAgentId);
      s.audit.action('grants.add', caller, peerOf(ctx), { target: p.agentId, peer: p.peerAgentId });
      return { grant };
    },
    'grants.remove': async (p, caller, ctx) => {
      const removed = await s.directory.removeGrant(p.agentId, p.peerAgentId);
      s.audit.action('grants.remove', caller, peerOf(ctx), { target: p.agentId, peer: p.peerAgentId, removed });
      return { removed };
    },
    'grants.list': async (p, caller) => {
      const own = agentIdOf(caller);
      if (own !== null && p.agentId !== undefined && p.agentId !== own)
        throw errors.permissionDenied('NOT_OWN', 'agents may list only their own grants');
      return s.directory.listGrants(own ?? p.agentId, p.cursor, p.limit ?? LIST_LIMIT);
    },

    'chats.open': async (p, caller, ctx) => {
      if (caller.role === 'agent') {
        if (p.peerAgentId === undefined) throw errors.invalidParams('peerAgentId', 'agents open a chat with {peerAgentId}');
        const r = await s.directory.openChat(caller, caller.agentId, p.peerAgentId);
        if (r.created) s.subscriptions.opened(r.chat);
        return r;
      }
      if (p.agentAId === undefined || p.agentBId === undefined)
        throw errors.invalidParams('agentAId', 'admin opens a chat with {agentAId, agentBId}');
      const r = await s.directory.openChat(caller, p.agentAId, p.agentBId);
      if (r.created) s.subscriptions.opened(r.chat);
      s.audit.action('chats.open', caller, peerOf(ctx), {
        chatId: r.chat.id,
        agentAId: r.chat.agentAId,
        agentBId: r.chat.agentBId,
        created: r.created,
      });
      return r;
    },
    'chats.get': (p, caller) => {
      const chat = s.directory.readableChat(caller, p.chatId);
      const [a, b] = chatStreamIds(chat);
      const state = (id: string) => {
        const meta = s.streams.committedMeta(id);
        if (!meta) throw errors.notFound('stream', id);
        return s.streams.state(meta);
      };
      return { chat, streams: [state(a), state(b)] };
    },
    'chats.list': (p, caller) => s.directory.listChats(caller, p.cursor, p.limit ?? LIST_LIMIT),
    'chats.permissions': (p, caller) => s.directory.permissions(s.directory.readableChat(caller, p.chatId)),
    'chats.history': async (p, caller, ctx) => {
      const page = await s.reader.history(caller, { ...p, limit: p.limit ?? 50 }, pageBytes(ctx)());
      s.metrics.read('chats.history', page.entries.length);
      return page;
    },
    'chats.follow': (p, caller, ctx) => s.subscriptions.follow(caller, p, ctx.connection),
    'chats.watch': (_p, caller, ctx) => {
      // Unreachable for the admin: the method is agent-only (AGENT_ONLY at the gate).
      if (caller.role !== 'agent') throw errors.permissionDenied('AGENT_ONLY', 'chats.watch is for agents');
      return s.subscriptions.watch(caller.agentId, ctx.connection);
    },
    'chats.unfollow': (p, _caller, ctx) => s.subscriptions.unfollow(p.subscriptionId, ctx.connection),

    'streams.get': (p, caller) => s.streams.get(caller, p.streamId),
    'streams.claim': (p, caller, ctx) => {
      // Every claim writes a fence record: claims per minute bound what one agent adds to the log.
      if (caller.role === 'agent') s.quotas.admitClaim(caller.agentId);
      return s.streams.claim(caller, { streamId: p.streamId, replace: p.replace ?? false, reason: p.reason }, ctx.connection);
    },
    'streams.release': async (p, caller, ctx) => {
      const state = await s.streams.release(caller, p);
      if (caller.role === 'admin')
        s.audit.action('streams.release', caller, peerOf(ctx), { streamId: p.streamId, epoch: state.writer.epoch });
      return state;
    },
    'streams.append': async (p, caller, ctx) => {
      const started = performance.now();
      const agentId = agentIdOf(caller);
      // The request as sent, as the wire measured it for the append cap (quotas.ts): serializing
      // the records again only to count them cost a full copy of every append (issue 54).
      const bytes = agentId === null ? 0 : (ctx.requestBytes ?? Buffer.byteLength(JSON.stringify(p.records), 'utf8'));
      // Synchronous: the append must be admitted in the turn its request is read (§6.7).
      if (agentId !== null) s.quotas.admitAppend(agentId, p.records.length, bytes);
      const r = await s.streams.append(
        caller,
        {
          ...p,
          generation: parseDecimal(p.generation),
          expectedPosition: parseDecimal(p.expectedPosition),
        },
        ctx.connection,
      );
      if (agentId !== null && !r.duplicate) s.quotas.appended(agentId, bytes);
      s.metrics.appended(p.records.length, bytes, r.duplicate, (performance.now() - started) / 1000);
      return r;
    },
    'streams.read': async (p, caller, ctx) => {
      const batch = await s.reader.read(
        caller,
        {
          streamId: p.streamId,
          generation: parseDecimal(p.generation),
          fromPosition: parseDecimal(p.fromPosition),
          limit: p.limit ?? 1000,
          maxBytes: p.maxBytes ?? PAGE_BYTES,
          waitMs: p.waitMs ?? 0,
        },
        pageBytes(ctx),
      );
      s.metrics.read('streams.read', batch.records.length);
      return batch;
    },
    'streams.checkpoint': (p, caller) =>
      streamCheckpoint(s.streams, s.signer, caller, {
        streamId: p.streamId,
        generation: parseDecimal(p.generation),
        fromPosition: p.fromPosition === undefined ? undefined : parseDecimal(p.fromPosition),
        nextPosition: p.nextPosition === undefined ? undefined : parseDecimal(p.nextPosition),
      }),
    'streams.trim': async (p, caller, ctx) => {
      const r = await s.streams.trim(p.streamId, parseDecimal(p.beforePosition), p.force === true);
      s.audit.action('streams.trim', caller, peerOf(ctx), {
        streamId: p.streamId,
        beforePosition: p.beforePosition,
        force: p.force === true,
        firstPosition: r.firstPosition,
      });
      return r;
    },
    'streams.reset': async (p, caller, ctx) => {
      const state = await s.streams.reset(p.streamId, p.reason);
      s.audit.action('streams.reset', caller, peerOf(ctx), { streamId: p.streamId, generation: state.generation });
      return state;
    },

    'operations.get': (p, caller) => s.streams.operation(caller, p.streamId, p.operationId),
    'operations.list': (p, caller) => s.streams.operations(caller, p.streamId, p.cursor, p.limit ?? 100),
    'rpc.discover': () => buildOpenRpc(s.version),
  };
}
