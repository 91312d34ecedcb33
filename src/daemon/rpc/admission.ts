import { errors, type YelloError } from '../../shared/errors.js';
import type { Caller } from '../caller.js';
import type { Audit, AuditFields } from './audit.js';

/** How connections are admitted (docs/security.md "Connection admission", docs/protocol.md §3.2). */
export interface AdmissionOptions {
  /** Open connections in all (`--max-connections`). */
  maxConnections: number;
  /** Connections without a session (`--max-pending-hellos`): past it, the oldest idle one is closed. */
  maxPendingHellos: number;
  /** Sessions of one agent (`--max-sessions-per-agent`). */
  maxSessionsPerAgent: number;
  /** Time from connecting to a successful `session.hello` (`--hello-timeout-ms`). */
  helloTimeoutMs: number;
}

/**
 * Connections kept from agent sessions: agents together hold at most `maxConnections` minus
 * this, so whatever the agents do, the admin (who can only be told apart after hello) finds a
 * slot, taking the place of the oldest connection still without a session if need be.
 */
export const ADMIN_RESERVED_CONNECTIONS = 8;

/** What admission needs of a connection. */
export interface AdmittedConnection {
  readonly id: number;
  readonly caller: Caller | null;
  /** True while it has a request in progress or input waiting (e.g. a `session.hello` being answered). */
  readonly busy: boolean;
  readonly peer: { conn: number; socketInode: number | null };
  /** Send one error line (id null), then close. */
  closeWith(error: YelloError): void;
  onClose(listener: () => void): void;
}

/**
 * Who may hold a connection. Before `session.hello`, connections wait in a bounded pool with a
 * deadline: past the pool's size the oldest idle one is closed (RATE_LIMITED), so silent
 * connections cannot take the slots that clients about to say hello need; past the deadline
 * one is closed (UNAUTHENTICATED). After hello, agents are capped per agent and in all,
 * leaving ADMIN_RESERVED_CONNECTIONS for the admin. Every closing is audited.
 */
export class Admission {
  readonly #opts: AdmissionOptions;
  readonly #audit: Audit;
  /** Connections without a session, oldest first (a Set keeps insertion order). */
  readonly #pending = new Set<AdmittedConnection>();
  readonly #timers = new Map<AdmittedConnection, NodeJS.Timeout>();
  readonly #perAgent = new Map<string, number>();
  #agentSessions = 0;

  constructor(opts: AdmissionOptions, audit: Audit) {
    this.#opts = opts;
    this.#audit = audit;
  }

  get options(): Readonly<AdmissionOptions> {
    return this.#opts;
  }

  /** Connections still without a session. */
  get pending(): number {
    return this.#pending.size;
  }

  /**
   * Make room for one more connection without a session when `open` connections are open:
   * close the oldest idle pending one if the pool or the whole cap is full. False when no room
   * can be made (everything is a session or busy saying hello): refuse the newcomer.
   */
  makeRoom(open: number): boolean {
    if (this.#pending.size < this.#opts.maxPendingHellos && open < this.#opts.maxConnections) return true;
    for (const c of this.#pending) {
      if (c.busy) continue;
      const full = this.#pending.size >= this.#opts.maxPendingHellos;
      this.#close(
        c,
        full ? 'PENDING_HELLOS' : 'MAX_CONNECTIONS',
        errors.rateLimited(
          1000,
          full
            ? `connections waiting for session.hello (max ${this.#opts.maxPendingHellos})`
            : `connections (max ${this.#opts.maxConnections})`,
        ),
        {
          max: full ? this.#opts.maxPendingHellos : this.#opts.maxConnections,
        },
      );
      return true;
    }
    return false;
  }

  /** A new connection: it waits in the pool until its session, at most `helloTimeoutMs`. */
  accepted(c: AdmittedConnection): void {
    this.#pending.add(c);
    const timer = setTimeout(() => {
      if (c.caller === null)
        this.#close(
          c,
          'HELLO_TIMEOUT',
          errors.unauthenticated(
            `no session.hello within ${this.#opts.helloTimeoutMs} ms of connecting; connect again and call session.hello first`,
          ),
          {
            timeoutMs: this.#opts.helloTimeoutMs,
          },
        );
    }, this.#opts.helloTimeoutMs);
    timer.unref();
    this.#timers.set(c, timer);
    c.onClose(() => {
      this.#leavePool(c);
    });
  }

  /**
   * `session.hello` succeeded for `c` as `caller`: throw RATE_LIMITED if that agent, or the
   * agents together, hold all the sessions they may; else count it until the connection closes.
   * A connection that says hello again keeps its slot.
   */
  session(c: AdmittedConnection, caller: Caller): void {
    const before = c.caller;
    const sameAgent = before?.role === 'agent' && caller.role === 'agent' && before.agentId === caller.agentId;
    if (caller.role === 'agent' && !sameAgent) {
      const own = this.#perAgent.get(caller.agentId) ?? 0;
      if (own >= this.#opts.maxSessionsPerAgent)
        throw errors.rateLimited(1000, `sessions of this agent (max ${this.#opts.maxSessionsPerAgent}); close one of its connections`);
      const agentCap = Math.max(1, this.#opts.maxConnections - ADMIN_RESERVED_CONNECTIONS);
      if (this.#agentSessions >= agentCap) throw errors.rateLimited(1000, `agent sessions (max ${agentCap})`);
    }
    this.#leavePool(c);
    if (sameAgent) return;
    if (before?.role === 'agent') this.#countAgent(before.agentId, -1);
    if (caller.role === 'agent') {
      this.#countAgent(caller.agentId, 1);
      const agentId = caller.agentId;
      c.onClose(() => {
        // The connection's last session is the one counted.
        if (c.caller?.role === 'agent' && c.caller.agentId === agentId) this.#countAgent(agentId, -1);
      });
    }
  }

  #countAgent(agentId: string, delta: number): void {
    const n = (this.#perAgent.get(agentId) ?? 0) + delta;
    if (n <= 0) this.#perAgent.delete(agentId);
    else this.#perAgent.set(agentId, n);
    this.#agentSessions += delta;
  }

  #leavePool(c: AdmittedConnection): void {
    this.#pending.delete(c);
    const timer = this.#timers.get(c);
    if (timer) clearTimeout(timer);
    this.#timers.delete(c);
  }

  #close(c: AdmittedConnection, reason: string, error: YelloError, fields: AuditFields): void {
    this.#leavePool(c);
    this.#audit.burst('connection.closed', reason, { ...c.peer, reason, pending: this.#pending.size, ...fields });
    c.closeWith(error);
  }
}
