import { errors } from '../../shared/errors.js';
import type { Grant } from '../../shared/results.js';
import type { Chat } from '../../shared/types.js';
import type { TokenCodec } from '../crypto/token-codec.js';
import { untrustworthy } from '../store/integrity.js';
import type { StorePort } from '../store/port/store-port.js';
import { outcomeOf } from '../store/port/stream-port.js';
import { settled, type Agents } from './agents.js';
import { listPage, openListCursor } from './list-cursor.js';

const GRANTS_CURSOR_KIND = 'grants';

/** Who may talk to whom: `open`, anyone; `grants`, only pairs an admin granted. */
export type ChatPolicy = 'grants' | 'open';

/**
 * Grants, one per direction, and what they allow. Lookups read the admitted state, so a
 * revocation applies to the very next append.
 */
export class Grants {
  readonly #store: StorePort;
  readonly #agents: Agents;
  readonly #codec: TokenCodec;
  readonly policy: ChatPolicy;
  /**
   * Keys in the grants range that failed their checksum at startup (checkDamage). A flipped bit
   * in a key turns `g/A/B` into a key nobody looks up: the grant is then simply absent. While
   * such damage exists, an absent grant is not a definite "no".
   */
  #damaged: string[] = [];

  constructor(store: StorePort, agents: Agents, policy: ChatPolicy, codec: TokenCodec) {
    this.#codec = codec;
    this.#store = store;
    this.#agents = agents;
    this.policy = policy;
  }

  async add(agentId: string, peerAgentId: string): Promise<Grant> {
    this.#store.assertWritable();
    this.#agents.require(agentId);
    this.#agents.require(peerAgentId);
    if (agentId === peerAgentId) throw errors.invalidParams('peerAgentId', 'an agent cannot be granted a chat with itself');
    const directory = this.#store.directory;
    const existing = directory.grant(agentId, peerAgentId, 'admitted');
    if (existing !== undefined) {
      await directory.grantDurable(agentId, peerAgentId);
      return existing;
    }
    const grant: Grant = { agentId, peerAgentId, grantedAt: new Date().toISOString() };
    settled(await outcomeOf(directory.putGrant(grant)));
    return grant;
  }

  async remove(agentId: string, peerAgentId: string): Promise<boolean> {
    this.#store.assertWritable();
    this.#agents.require(agentId);
    this.#agents.require(peerAgentId);
    const directory = this.#store.directory;
    if (directory.grant(agentId, peerAgentId, 'admitted') === undefined) return false;
    settled(await outcomeOf(directory.deleteGrant(agentId, peerAgentId)));
    return true;
  }

  /** `grants.list`: a page of the grants of `agentId` (all without it), by agent then peer. */
  async list(
    agentId: string | undefined,
    cursor: string | undefined,
    limit: number,
  ): Promise<{ grants: Grant[]; nextCursor: string | null }> {
    // A position is `agentId/peerAgentId` (ids never contain `/`); a filtered list's cursors start with its agent.
    const opened = openListCursor(this.#codec, GRANTS_CURSOR_KIND, cursor, agentId === undefined ? '' : `${agentId}/`, 2);
    const [from = '', peer = ''] = opened?.split('/') ?? [];
    const after: [string, string] | undefined = opened === undefined ? undefined : [from, peer];
    const rows = await this.#store.directory.grants(agentId, { ...(after !== undefined ? { after } : {}), limit: limit + 1 });
    const page = listPage(this.#codec, GRANTS_CURSOR_KIND, rows, limit, (g) => `${g.agentId}/${g.peerAgentId}`);
    return { grants: page.entries, nextCursor: page.nextCursor };
  }

  /** The grant letting `agentId` talk to `peerAgentId` (admitted state: revocation applies to the next append). */
  get(agentId: string, peerAgentId: string): Grant | null {
    return this.#store.directory.grant(agentId, peerAgentId, 'admitted') ?? null;
  }

  /**
   * Reads every stored grant once and remembers the keys that fail their checksum (startup; a
   * store has few grants). Returns those keys, for the log.
   */
  async checkDamage(): Promise<string[]> {
    this.#damaged = (await this.#store.directory.damaged()).grants;
    return this.#damaged;
  }

  /**
   * Whether `agentId` may open a chat with, or send to, `peerAgentId` now. With no grant while
   * damaged grant keys exist, the answer is STORAGE_FAILURE/CORRUPT naming one: the missing
   * grant may be the damaged one, and a silent "no grant" would misreport it.
   */
  maySend(agentId: string, peerAgentId: string): boolean {
    if (this.policy === 'open' || this.get(agentId, peerAgentId) !== null) return true;
    const damaged = this.#damaged[0];
    if (damaged !== undefined) {
      throw untrustworthy(
        damaged,
        `a grant key failed its checksum, so the absence of a grant from ${agentId} to ${peerAgentId} cannot be trusted`,
      );
    }
    return false;
  }

  /**
   * Where other daemons write the directory too (PostgreSQL): whether a grant this daemon does
   * not have was made through another one, unheard here yet (read again from the store). A
   * NO_GRANT decided on the rows here is confirmed with this before it is answered. Always
   * false where memory is the store.
   */
  async appeared(agentId: string, peerAgentId: string): Promise<boolean> {
    const reload = this.#store.directory.reload?.bind(this.#store.directory);
    if (!reload || this.policy === 'open') return false;
    await reload({ grants: [[agentId, peerAgentId]] });
    return this.get(agentId, peerAgentId) !== null;
  }

  /** `chats.permissions`: what each participant may do in `chat` now, and why. */
  permissions(chat: Chat) {
    const participant = (agentId: string, peerId: string) => {
      const row = this.#agents.row(agentId, false);
      const enabled = !!row && !row.disabled;
      const grant = this.get(agentId, peerId);
      const canSend = enabled && (this.policy === 'open' || grant !== null);
      return { agentId, canRead: enabled, canSend, canClaim: enabled, grant: grant ? { grantedAt: grant.grantedAt } : null };
    };
    return {
      chatId: chat.id,
      policy: this.policy,
      participants: [participant(chat.agentAId, chat.agentBId), participant(chat.agentBId, chat.agentAId)],
    };
  }
}
