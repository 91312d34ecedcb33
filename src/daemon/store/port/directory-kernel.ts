// The directory half of the port's kernel (as stream-kernel.ts for streams): the gate, the unique
// keys checked against admitted state (a username, a pair) in the call that admits the write, and
// the pending overlay of agents, usernames, grants and pairs with their durable promises. An
// adapter implements only its committed reads and `_enqueue`, its group commit of a write.

import type { DirectoryAdmission, DirectoryChange, DirectoryOutcome, DirectoryPort, PageRequest, View } from './directory-port.js';
import { rejected, type StoreGate } from './gate.js';
import { Pending } from './pending.js';
import type { AgentRow, ChatRow, GrantRow, StreamMeta } from './values.js';

const pairKey = (a: string, b: string) => `${a}\n${b}`;

export abstract class DirectoryKernel implements DirectoryPort {
  protected readonly gate: StoreGate;
  readonly #agents = new Pending<AgentRow>();
  readonly #usernames = new Pending<string>();
  readonly #grants = new Pending<GrantRow | null>();
  readonly #pairs = new Pending<string>();

  protected constructor(gate: StoreGate) {
    this.gate = gate;
  }

  // ---- what an adapter implements ------------------------------------------------------------

  /** Committed rows, from memory (synchronous). */
  protected abstract _agent(agentId: string): AgentRow | undefined;
  protected abstract _agentIdByUsername(username: string): string | undefined;
  protected abstract _agentIdByToken(tokenHash: string): string | undefined;
  protected abstract _grant(agentId: string, peerAgentId: string): GrantRow | undefined;
  protected abstract _chat(chatId: string): ChatRow | undefined;
  protected abstract _chatOfPair(agentAId: string, agentBId: string): string | undefined;
  /** Queue an admitted write for the group commit (synchronous); the adapter updates its committed rows before the outcome settles. */
  protected abstract _enqueue(change: DirectoryChange): Promise<DirectoryOutcome>;
  protected abstract _agents(page: PageRequest<string>): Promise<AgentRow[]>;
  protected abstract _grants(agentId: string | undefined, page: PageRequest<[agentId: string, peerAgentId: string]>): Promise<GrantRow[]>;
  protected abstract _chatIds(agentId: string | undefined, page: PageRequest<string>): Promise<string[]>;
  protected abstract _damaged(): Promise<{ tokenIndex: string[]; grants: string[] }>;

  // ---- agents ---------------------------------------------------------------------------------

  agent(agentId: string, view: View): AgentRow | undefined {
    this.gate.assertOpen();
    if (view === 'admitted') {
      const p = this.#agents.get(agentId);
      if (p) return p.value;
    }
    return this._agent(agentId);
  }

  agentPending(agentId: string): boolean {
    return this.#agents.has(agentId);
  }

  agentIdByUsername(username: string, view: View): string | undefined {
    this.gate.assertOpen();
    if (view === 'admitted') {
      const p = this.#usernames.get(username);
      if (p) return p.value;
    }
    return this._agentIdByUsername(username);
  }

  agentIdByToken(tokenHash: string): string | undefined {
    this.gate.assertOpen();
    return this._agentIdByToken(tokenHash);
  }

  agents(page: PageRequest<string>): Promise<AgentRow[]> {
    return this.#read(() => this._agents(page));
  }

  createAgent(row: AgentRow): DirectoryAdmission {
    this.gate.assertWritable();
    const holder = this.agentIdByUsername(row.username, 'admitted');
    if (holder !== undefined) return { status: 'duplicate', existing: holder };
    const durable = this.#admit({ kind: 'createAgent', row }, () => {
      this.#agents.done(row.id);
      this.#usernames.done(row.username);
    });
    this.#agents.add(row.id, row, durable);
    this.#usernames.add(row.username, row.id, durable);
    return { status: 'admitted', durable };
  }

  updateAgent(row: AgentRow, previous: AgentRow): DirectoryAdmission {
    this.gate.assertWritable();
    const durable = this.#admit({ kind: 'updateAgent', row, previous }, () => {
      this.#agents.done(row.id);
    });
    this.#agents.add(row.id, row, durable);
    return { status: 'admitted', durable };
  }

  // ---- grants ---------------------------------------------------------------------------------

  grant(agentId: string, peerAgentId: string, view: View): GrantRow | undefined {
    this.gate.assertOpen();
    if (view === 'admitted') {
      const p = this.#grants.get(pairKey(agentId, peerAgentId));
      if (p) return p.value ?? undefined;
    }
    return this._grant(agentId, peerAgentId);
  }

  grantPending(agentId: string, peerAgentId: string): boolean {
    return this.#grants.has(pairKey(agentId, peerAgentId));
  }

  grantDurable(agentId: string, peerAgentId: string): Promise<void> {
    return this.#grants.durable(pairKey(agentId, peerAgentId));
  }

  grants(agentId: string | undefined, page: PageRequest<[agentId: string, peerAgentId: string]>): Promise<GrantRow[]> {
    return this.#read(() => this._grants(agentId, page));
  }

  putGrant(grant: GrantRow): DirectoryAdmission {
    this.gate.assertWritable();
    const key = pairKey(grant.agentId, grant.peerAgentId);
    const durable = this.#admit({ kind: 'putGrant', grant }, () => {
      this.#grants.done(key);
    });
    this.#grants.add(key, grant, durable);
    return { status: 'admitted', durable };
  }

  deleteGrant(agentId: string, peerAgentId: string): DirectoryAdmission {
    this.gate.assertWritable();
    const key = pairKey(agentId, peerAgentId);
    const durable = this.#admit({ kind: 'deleteGrant', agentId, peerAgentId }, () => {
      this.#grants.done(key);
    });
    this.#grants.add(key, null, durable);
    return { status: 'admitted', durable };
  }

  // ---- chats ----------------------------------------------------------------------------------

  chat(chatId: string): ChatRow | undefined {
    this.gate.assertOpen();
    return this._chat(chatId);
  }

  chatOfPair(agentAId: string, agentBId: string, view: View): string | undefined {
    this.gate.assertOpen();
    if (view === 'admitted') {
      const p = this.#pairs.get(pairKey(agentAId, agentBId));
      if (p) return p.value;
    }
    return this._chatOfPair(agentAId, agentBId);
  }

  pairDurable(agentAId: string, agentBId: string): Promise<void> {
    return this.#pairs.durable(pairKey(agentAId, agentBId));
  }

  createChat(row: ChatRow, heads: readonly [StreamMeta, StreamMeta]): DirectoryAdmission {
    this.gate.assertWritable();
    const existing = this.chatOfPair(row.agentAId, row.agentBId, 'admitted');
    if (existing !== undefined) return { status: 'duplicate', existing };
    const key = pairKey(row.agentAId, row.agentBId);
    const durable = this.#admit({ kind: 'createChat', row, heads }, () => {
      this.#pairs.done(key);
    });
    this.#pairs.add(key, row.id, durable);
    return { status: 'admitted', durable };
  }

  chatIds(agentId: string | undefined, page: PageRequest<string>): Promise<string[]> {
    return this.#read(() => this._chatIds(agentId, page));
  }

  damaged(): Promise<{ tokenIndex: string[]; grants: string[] }> {
    return this.#read(() => this._damaged());
  }

  // ---- helpers --------------------------------------------------------------------------------

  /** Hand an admitted write to the adapter; `done` drops its pending entries once it settled, whatever the outcome. */
  #admit(change: DirectoryChange, done: () => void): Promise<DirectoryOutcome> {
    return this._enqueue(change).then(
      (o) => {
        done();
        return o;
      },
      (err: unknown) => {
        done();
        throw err;
      },
    );
  }

  #read<T>(read: () => Promise<T>): Promise<T> {
    try {
      this.gate.assertOpen();
      return read();
    } catch (err) {
      return rejected(err);
    }
  }
}
