import { errors } from '../../shared/errors.js';
import type { Grant } from '../../shared/results.js';
import type { Chat } from '../../shared/types.js';
import { K } from '../store/leveldb/key-layout.js';
import { damagedKeys, untrustworthy } from '../store/leveldb/damage-scan.js';
import { put, type Storage } from '../store/leveldb/storage.js';
import { keyPage } from '../store/leveldb/key-page.js';
import type { TokenCodec } from '../crypto/token-codec.js';
import type { Agents } from './agents.js';

const GRANTS_CURSOR_KIND = 'grants';

/** Who may talk to whom: `open`, anyone; `grants`, only pairs an admin granted. */
export type ChatPolicy = 'grants' | 'open';

/**
 * Grants, one per direction, and what they allow. Lookups read the admitted state, so a
 * revocation applies to the very next append.
 */
export class Grants {
  readonly #storage: Storage;
  readonly #agents: Agents;
  readonly #codec: TokenCodec;
  readonly policy: ChatPolicy;
  /** Committed grants (null: known absent) by key. */
  readonly #cache = new Map<string, Grant | null>();
  /**
   * Keys in the grants range that failed their checksum at startup (checkDamage). A flipped bit
   * in a key turns `g/A/B` into a key nobody looks up: the grant is then simply absent. While
   * such damage exists, an absent grant is not a definite "no".
   */
  #damaged: string[] = [];

  constructor(storage: Storage, agents: Agents, policy: ChatPolicy, codec: TokenCodec) {
    this.#codec = codec;
    this.#storage = storage;
    this.#agents = agents;
    this.policy = policy;
  }

  async add(agentId: string, peerAgentId: string): Promise<Grant> {
    this.#storage.assertWritable();
    this.#agents.require(agentId);
    this.#agents.require(peerAgentId);
    if (agentId === peerAgentId) throw errors.invalidParams('peerAgentId', 'an agent cannot be granted a chat with itself');
    const key = K.grant(agentId, peerAgentId);
    const existing = this.#storage.getAdmitted<Grant>(key);
    if (existing !== undefined) {
      await this.#storage.durable(key);
      return existing;
    }
    const grant: Grant = { agentId, peerAgentId, grantedAt: new Date().toISOString() };
    await this.#storage.write([put(key, grant)]);
    this.#cache.set(key, grant);
    return grant;
  }

  async remove(agentId: string, peerAgentId: string): Promise<boolean> {
    this.#storage.assertWritable();
    this.#agents.require(agentId);
    this.#agents.require(peerAgentId);
    const key = K.grant(agentId, peerAgentId);
    if (this.#storage.getAdmitted(key) === undefined) return false;
    await this.#storage.write([{ type: 'del', key }]);
    this.#cache.set(key, null);
    return true;
  }

  /** `grants.list`: a page of the grants of `agentId` (all without it), by agent then peer. */
  async list(
    agentId: string | undefined,
    cursor: string | undefined,
    limit: number,
  ): Promise<{ grants: Grant[]; nextCursor: string | null }> {
    const page = await keyPage<Grant>(this.#storage, this.#codec, GRANTS_CURSOR_KIND, K.grantsPrefix(agentId), cursor, limit);
    return { grants: page.entries.map(({ value }) => value), nextCursor: page.nextCursor };
  }

  /** The grant letting `agentId` talk to `peerAgentId` (admitted state: revocation applies to the next append). */
  get(agentId: string, peerAgentId: string): Grant | null {
    const key = K.grant(agentId, peerAgentId);
    if (!this.#storage.hasPending(key)) {
      const cached = this.#cache.get(key);
      if (cached !== undefined) return cached;
    }
    const grant = this.#storage.getAdmitted<Grant>(key) ?? null;
    if (!this.#storage.hasPending(key)) this.#cache.set(key, grant);
    return grant;
  }

  /**
   * Reads every stored grant once and remembers the keys that fail their checksum (startup; a
   * store has few grants). Returns those keys, for the log.
   */
  async checkDamage(): Promise<string[]> {
    this.#damaged = await damagedKeys(this.#storage, K.grantsPrefix());
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
