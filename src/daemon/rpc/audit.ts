import type { Logger } from 'pino';
import type { Caller } from '../caller.js';

/** Admin actions that leave one `info` line each (docs/security.md "Audit log"). */
export type AuditAction =
  | 'agents.create'
  | 'agents.rotateToken'
  | 'agents.disable'
  | 'agents.setPolicy'
  | 'grants.add'
  | 'grants.remove'
  | 'keys.rotate'
  | 'daemon.backup'
  | 'streams.trim'
  | 'streams.reset'
  | 'streams.release'
  | 'chats.open';

/** Security events that leave a `warn` line (bursts summarised, see `Audit.burst`). */
export type SecurityEvent = 'session.hello.failed' | 'rate-limited' | 'connection.refused' | 'connection.closed' | 'accept.failed';

/** Who a connection is, as far as the daemon can tell (docs/security.md: no SO_PEERCRED in Node). */
export interface PeerInfo {
  conn: number;
  /** Inode of the daemon's end of the Unix socket; `ss -xp` maps it to the peer process. */
  socketInode: number | null;
}

/** Ids only: what an audit line may carry. Never a token, a key, content or free text. */
export type AuditFields = Record<string, string | number | boolean | null>;

/** Window over which repeated events of one kind are counted instead of logged one by one. */
export const AUDIT_BURST_MS = 10_000;

/**
 * The audit log: one pino line per admin action and per security event, with a stable
 * `audit` field naming it, the actor (`role`, `agentId`) and the ids it touched. Events a
 * client can repeat at will (rate limiting, refused connections, failed accepts) are logged
 * once per burst: the first at once, then one summary with the count at the end of the window,
 * so a flood cannot flood the log.
 */
export class Audit {
  readonly #log: Logger;
  readonly #bursts = new Map<string, { count: number; fields: AuditFields }>();

  constructor(log: Logger) {
    this.#log = log;
  }

  /** An admin action that succeeded. */
  action(action: AuditAction, caller: Caller, peer: PeerInfo, fields: AuditFields = {}): void {
    this.#log.info(
      { audit: action, role: caller.role, agentId: caller.role === 'agent' ? caller.agentId : null, ...peer, ...fields },
      `audit: ${action}`,
    );
  }

  /** A security event, logged as it happens. */
  security(event: SecurityEvent, fields: AuditFields): void {
    this.#log.warn({ audit: event, ...fields }, `audit: ${event}`);
  }

  /**
   * A security event that may repeat in floods: the first of a burst (per `key`) is logged at
   * once with `count: 1`; the rest are counted and logged as one line with their `count` and
   * `windowMs` when the window ends (its other fields are those of the last one).
   */
  burst(event: SecurityEvent, key: string, fields: AuditFields): void {
    const id = `${event}\u0000${key}`;
    const open = this.#bursts.get(id);
    if (open) {
      open.count++;
      open.fields = fields;
      return;
    }
    this.#log.warn({ audit: event, count: 1, ...fields }, `audit: ${event}`);
    const burst = { count: 0, fields };
    this.#bursts.set(id, burst);
    setTimeout(() => {
      this.#bursts.delete(id);
      if (burst.count > 0)
        this.#log.warn({ audit: event, count: burst.count, windowMs: AUDIT_BURST_MS, ...burst.fields }, `audit: ${event}`);
    }, AUDIT_BURST_MS).unref();
  }
}
