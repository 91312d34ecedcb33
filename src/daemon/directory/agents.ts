import { errors } from '../../shared/errors.js';
import type { Agent, AgentSummary, PiiMode } from '../../shared/types.js';
import { hashToken, newToken, randomId } from '../crypto/tokens.js';
import type { TokenCodec } from '../crypto/token-codec.js';
import type { DirectoryOutcome } from '../store/port/directory-port.js';
import type { StorePort } from '../store/port/store-port.js';
import { outcomeOf } from '../store/port/stream-port.js';
import type { AgentRow } from '../store/port/values.js';
import { listPage, openListCursor } from './list-cursor.js';

export type { AgentRow } from '../store/port/values.js';

const AGENT_TOKEN_PREFIX = 'yello_agt_';
const AGENTS_CURSOR_KIND = 'agents';

/**
 * Agents: who exists, their bearer token (stored as a hash, indexed by it), their PII mode and
 * whether they are disabled. Usernames are unique: checked and admitted synchronously.
 */
export class Agents {
  readonly #store: StorePort;
  readonly #codec: TokenCodec;

  constructor(store: StorePort, codec: TokenCodec) {
    this.#store = store;
    this.#codec = codec;
  }

  /**
   * An agent row: committed (what every RPC checks its session against), or as admitted with a
   * pending write (`admitted`, the default).
   */
  row(agentId: string, admitted = true): AgentRow | undefined {
    return this.#store.directory.agent(agentId, admitted ? 'admitted' : 'committed');
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
    const id = this.#store.directory.agentIdByUsername(username, 'committed');
    if (id === undefined) throw errors.notFound('agent', username);
    return this.get(id);
  }

  /** Id, name, username and image of an agent, for expanding a chat (the id stands in for a lost row). */
  summary(agentId: string): AgentSummary {
    const row = this.row(agentId, false);
    return { id: agentId, name: row?.name ?? agentId, username: row?.username ?? agentId, image: row?.image ?? null };
  }

  async create(username: string, name: string, image: string | undefined): Promise<{ agent: Agent; token: string }> {
    this.#store.assertWritable();
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
    const outcome = await outcomeOf(this.#store.directory.createAgent(row));
    if (outcome.status === 'duplicate') {
      throw errors.invalidParams('username', `username "${username}" is already taken: choose another`);
    }
    settled(outcome);
    return { agent: publicAgent(row), token };
  }

  /** `agents.list`: a page of agents in id order (docs/protocol.md §6.4). */
  async list(cursor: string | undefined, limit: number): Promise<{ agents: Agent[]; nextCursor: string | null }> {
    const after = openListCursor(this.#codec, AGENTS_CURSOR_KIND, cursor, '', 1);
    const rows = await this.#store.directory.agents({ ...(after !== undefined ? { after } : {}), limit: limit + 1 });
    const page = listPage(this.#codec, AGENTS_CURSOR_KIND, rows, limit, (r) => r.id);
    return { agents: page.entries.map(publicAgent), nextCursor: page.nextCursor };
  }

  async rotateToken(agentId: string): Promise<{ token: string }> {
    const token = newToken(AGENT_TOKEN_PREFIX);
    await this.#update(agentId, (row) => {
      row.tokenHash = hashToken(token);
    });
    return { token };
  }

  async disable(agentId: string): Promise<Agent> {
    const row = await this.#update(agentId, (r) => {
      r.disabled = true;
    });
    return publicAgent(row);
  }

  async setPolicy(agentId: string, pii: PiiMode): Promise<Agent> {
    const row = await this.#update(agentId, (r) => {
      r.pii = pii;
    });
    return publicAgent(row);
  }

  /** The sender's PII mode at admission time. */
  piiMode(agentId: string): PiiMode {
    return this.row(agentId)?.pii ?? 'redact';
  }

  async #update(agentId: string, change: (row: AgentRow) => void): Promise<AgentRow> {
    this.#store.assertWritable();
    const current = this.row(agentId);
    if (!current) throw errors.notFound('agent', agentId);
    const row = { ...current };
    change(row);
    settled(await outcomeOf(this.#store.directory.updateAgent(row, current)));
    return row;
  }
}

/**
 * Throw what a directory write's outcome says when it is not `ok`: an unknown outcome's
 * STORAGE_FAILURE (written or not, a restart tells); a duplicate the caller did not expect is a
 * broken invariant of the backend.
 */
export function settled(outcome: DirectoryOutcome): void {
  if (outcome.status === 'unknown') throw outcome.error;
  if (outcome.status === 'duplicate') throw new Error(`directory write refused: the key is held by ${outcome.existing}`);
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
