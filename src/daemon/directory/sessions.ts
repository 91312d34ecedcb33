import type { Caller } from '../caller.js';
import { hashToken, safeEqual } from '../crypto/tokens.js';
import type { StorePort } from '../store/port/store-port.js';
import type { Agents } from './agents.js';

/**
 * Who a bearer token is: the admin (compared in constant time) or an agent, found by the hash
 * of its token. A session lasts only while that token stays the agent's current one.
 */
export class Sessions {
  readonly #store: StorePort;
  readonly #agents: Agents;
  readonly #adminToken: string;
  /** Token-index keys that failed their checksum at startup (checkDamage). */
  #damaged: string[] = [];

  constructor(store: StorePort, agents: Agents, adminToken: string) {
    this.#store = store;
    this.#agents = agents;
    this.#adminToken = adminToken;
  }

  /** Map a token to a caller, or null. Agent tokens are looked up by hash. */
  authenticate(token: string): Caller | null {
    if (safeEqual(token, this.#adminToken)) return { role: 'admin' };
    const tokenHash = hashToken(token);
    const agentId = this.#store.directory.agentIdByToken(tokenHash);
    if (agentId === undefined) return null;
    const agent = this.#agents.row(agentId, false);
    if (!agent || agent.disabled || agent.tokenHash !== tokenHash) return null;
    return { role: 'agent', agentId, tokenHash };
  }

  /**
   * Reads the whole token index once and remembers the keys that fail their checksum (startup).
   * A flipped bit in a key moves an agent's entry where no hash finds it: that agent's valid
   * token then looks unknown. Returns the damaged keys, for the log.
   */
  async checkDamage(): Promise<string[]> {
    this.#damaged = (await this.#store.directory.damaged()).tokenIndex;
    return this.#damaged;
  }

  /** A damaged token-index key, while there is one: an unknown token may be a valid one. */
  get indexDamage(): string | null {
    return this.#damaged[0] ?? null;
  }

  /**
   * A session stays valid only while its token is the agent's current one and it is enabled.
   * Where other daemons write the directory too (PostgreSQL), what the rows here still allow is
   * confirmed against the store: a rotation or a disable through another daemon refuses the
   * session's next call here, before this daemon hears of it. That confirmation is returned as a
   * function that asks the store, for the caller to ask when the answer needs it: a call whose
   * commit checks the session in its own transaction asks only for an answer no commit made.
   */
  stillValid(caller: Caller): boolean | (() => Promise<boolean>) {
    if (caller.role === 'admin') return true;
    const agent = this.#agents.row(caller.agentId, false);
    if (!agent || agent.disabled || agent.tokenHash !== caller.tokenHash) return false;
    const directory = this.#store.directory;
    if (!directory.confirmSession) return true;
    return () => directory.confirmSession?.(caller.agentId, caller.tokenHash) ?? Promise.resolve(true);
  }

  /**
   * `authenticate`, with an unknown token confirmed against the store first where other daemons
   * write the directory too: a token made or rotated through another daemon, unheard here yet.
   */
  async authenticateConfirmed(token: string): Promise<Caller | null> {
    const caller = this.authenticate(token);
    const reload = this.#store.directory.reload?.bind(this.#store.directory);
    if (caller || !reload) return caller;
    await reload({ tokens: [hashToken(token)] });
    return this.authenticate(token);
  }
}
