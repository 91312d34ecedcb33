import { errors } from '../../shared/errors.js';
import type { Agent, AgentSummary, PiiMode } from '../../shared/types.js';
import { hashToken, newToken, randomId } from '../crypto/tokens.js';
import type { Counters } from '../store/leveldb/counters.js';
import { K } from '../store/leveldb/key-layout.js';
import { put, type Storage, type WriteOp } from '../store/leveldb/storage.js';
import { keyPage } from '../store/leveldb/key-page.js';
import type { TokenCodec } from '../crypto/token-codec.js';

/** An agent row as stored: the public agent plus its token hash. */
export interface AgentRow extends Agent {
  tokenHash: string;
}

const AGENT_TOKEN_PREFIX = 'yello_agt_';
const AGENTS_CURSOR_KIND = 'agents';

/**
 * Agents: who exists, their bearer token (stored as a hash, indexed by it), their PII mode and
 * whether they are disabled. Usernames are unique: checked and admitted synchronously.
 */
export class Agents {
  readonly #storage: Storage;
  readonly #counters: Counters;
  readonly #codec: TokenCodec;
  /** Committed agent rows by id (filled on read, refreshed on commit). */
  readonly #rows = new Map<string, AgentRow>();

  constructor(storage: Storage, counters: Counters, codec: TokenCodec) {
    this.#storage = storage;
    this.#counters = counters;
    this.#codec = codec;
  }

  /**
   * An agent row. Committed rows are cached (every RPC checks its session against one); the
   * cache is refreshed when a write of the row commits. `admitted` reads see a pending write.
   */
  row(agentId: string, admitted = true): AgentRow | undefined {
    const key = K.agent(agentId);
    if (admitted && this.#storage.hasPending(key)) return this.#storage.getAdmitted<AgentRow>(key);
    const cached = this.#rows.get(agentId);
    if (cached) return cached;
    const row = this.#storage.get<AgentRow>(key);
    if (row === undefined) return undefined;
    this.#rows.set(agentId, row);
    return row;
  }

  /** The admitted row, or NOT_FOUND. */
  require(agentId: string): AgentRow {
    const row = this.row(agentId);
    if (!row) throw errors.notFound('agent', agentId);
    return row;
  }

  /** The public agent, or NOT_FOUND. */
  get(agentId: string): Agent {
    const row = this.row(agentId, false);
    if (!row) throw errors.notFound('agent', agentId);
    return publicAgent(row);
  }

  byUsername(username: string): Agent {
    const id = this.#storage.get<string>(K.username(username));
    if (id === undefined) throw errors.notFound('agent', username);
    return this.get(id);
  }

  /** Id, name, username and image of an agent, for expanding a chat (the id stands in for a lost row). */
  summary(agentId: string): AgentSummary {
    const row = this.row(agentId, false);
    return { id: agentId, name: row?.name ?? agentId, username: row?.username ?? agentId, image: row?.image ?? null };
  }

  async create(username: string, name: string, image: string | undefined): Promise<{ agent: Agent; token: string }> {
    this.#storage.assertWritable();
    if (this.#storage.getAdmitted(K.username(username)) !== undefined) {
      throw errors.invalidParams('username', `username "${username}" is already taken: choose another`);
    }
    const token = newToken(AGENT_TOKEN_PREFIX);
    const row: AgentRow = {
      id: randomId('agt_'),
      username,
      name,
      image: image ?? null,
      disabled: false,
      pii: 'redact',
      createdAt: new Date().toISOString(),
      tokenHash: hashToken(token),
    };
    this.#counters.agents++;
    await this.#storage.write([
      put(K.agent(row.id), row),
      put(K.username(username), row.id),
      put(K.token(row.tokenHash), row.id),
      this.#counters.op(),
    ]);
    return { agent: publicAgent(row), token };
  }

  /** `agents.list`: a page of agents in id order (docs/protocol.md §6.4). */
  async list(cursor: string | undefined, limit: number): Promise<{ agents: Agent[]; nextCursor: string | null }> {
    const page = await keyPage<AgentRow>(this.#storage, this.#codec, AGENTS_CURSOR_KIND, K.agentsPrefix, cursor, limit);
    return { agents: page.entries.map(({ value }) => publicAgent(value)), nextCursor: page.nextCursor };
  }

  async rotateToken(agentId: string): Promise<{ token: string }> {
    const token = newToken(AGENT_TOKEN_PREFIX);
    await this.#update(agentId, (row) => {
      const old = row.tokenHash;
      row.tokenHash = hashToken(token);
      return [{ type: 'del', key: K.token(old) }, put(K.token(row.tokenHash), agentId)];
    });
    return { token };
  }

  async disable(agentId: string): Promise<Agent> {
    const row = await this.#update(agentId, (r) => {
      r.disabled = true;
      return [];
    });
    return publicAgent(row);
  }

  async setPolicy(agentId: string, pii: PiiMode): Promise<Agent> {
    const row = await this.#update(agentId, (r) => {
      r.pii = pii;
      return [];
    });
    return publicAgent(row);
  }

  /** The sender's PII mode at admission time. */
  piiMode(agentId: string): PiiMode {
    return this.row(agentId)?.pii ?? 'redact';
  }

  async #update(agentId: string, change: (row: AgentRow) => WriteOp[]): Promise<AgentRow> {
    this.#storage.assertWritable();
    const current = this.row(agentId);
    if (!current) throw errors.notFound('agent', agentId);
    const row = { ...current };
    const extra = change(row);
    await this.#storage.write([put(K.agent(agentId), row), ...extra]);
    this.#rows.set(agentId, row);
    return row;
  }
}

function publicAgent(row: AgentRow): Agent {
  return {
    id: row.id,
    username: row.username,
    name: row.name,
    image: row.image,
    disabled: row.disabled,
    pii: row.pii,
    createdAt: row.createdAt,
  };
}
