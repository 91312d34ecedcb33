import { YelloError } from '../../../shared/errors.js';
import type { DirectoryOutcome, DirectoryPort, PageRequest, View } from '../port/directory-port.js';
import type { AgentRow, ChatRow, GrantRow, StreamMeta } from '../port/values.js';
import type { Counters } from './counters.js';
import { damagedKeys } from './damage-scan.js';
import { K, prefixEnd } from './key-layout.js';
import { put, type Storage, type WriteOp } from './storage.js';
import { streamMetaOp } from './stream-tables.js';

/**
 * The directory port on one local LevelDB (store/port/directory-port.ts): agents under `a/`,
 * usernames `u/`, the token index `t/`, grants `g/`, chats `c/`, pairs `p/`, memberships `m/`.
 * Unique keys are checked against Storage's admitted overlay in the call that admits the write,
 * so the check and the admission are one synchronous step. Committed agent rows and grants are
 * cached (every RPC checks a session, every append a grant).
 */
export class LevelDirectory implements DirectoryPort {
  readonly #storage: Storage;
  readonly #counters: Counters;
  /** Committed agent rows by id (filled on read, refreshed on commit). */
  readonly #rows = new Map<string, AgentRow>();
  /** Committed grants (null: known absent) by key. */
  readonly #grants = new Map<string, GrantRow | null>();

  constructor(storage: Storage, counters: Counters) {
    this.#storage = storage;
    this.#counters = counters;
  }

  // ---- agents ---------------------------------------------------------------------------------

  agent(agentId: string, view: View): AgentRow | undefined {
    const key = K.agent(agentId);
    if (view === 'admitted' && this.#storage.hasPending(key)) return this.#storage.getAdmitted<AgentRow>(key);
    const cached = this.#rows.get(agentId);
    if (cached) return cached;
    const row = this.#storage.get<AgentRow>(key);
    if (row === undefined) return undefined;
    this.#rows.set(agentId, row);
    return row;
  }

  agentPending(agentId: string): boolean {
    return this.#storage.hasPending(K.agent(agentId));
  }

  agentIdByUsername(username: string, view: View): string | undefined {
    const key = K.username(username);
    return view === 'admitted' ? this.#storage.getAdmitted<string>(key) : this.#storage.get<string>(key);
  }

  agentIdByToken(tokenHash: string): string | undefined {
    return this.#storage.get<string>(K.token(tokenHash));
  }

  async agents(page: PageRequest<string>): Promise<AgentRow[]> {
    return (await this.#page<AgentRow>(K.agentsPrefix, page.after === undefined ? undefined : K.agent(page.after), page.limit)).map(
      (e) => e.value,
    );
  }

  createAgent(row: AgentRow): Promise<DirectoryOutcome> {
    return this.#admit(() => {
      const holder = this.#storage.getAdmitted<string>(K.username(row.username));
      if (holder !== undefined) return { status: 'duplicate', existing: holder };
      this.#counters.agents++;
      return [put(K.agent(row.id), row), put(K.username(row.username), row.id), put(K.token(row.tokenHash), row.id), this.#counters.op()];
    });
  }

  updateAgent(row: AgentRow, previous: AgentRow): Promise<DirectoryOutcome> {
    return this.#admit(
      () => {
        const ops: WriteOp[] = [put(K.agent(row.id), row)];
        if (row.tokenHash !== previous.tokenHash)
          ops.push({ type: 'del', key: K.token(previous.tokenHash) }, put(K.token(row.tokenHash), row.id));
        return ops;
      },
      () => this.#rows.set(row.id, row),
    );
  }

  // ---- grants ---------------------------------------------------------------------------------

  grant(agentId: string, peerAgentId: string, view: View): GrantRow | undefined {
    const key = K.grant(agentId, peerAgentId);
    if (view === 'committed') return this.#storage.get<GrantRow>(key);
    if (!this.#storage.hasPending(key)) {
      const cached = this.#grants.get(key);
      if (cached !== undefined) return cached ?? undefined;
    }
    const grant = this.#storage.getAdmitted<GrantRow>(key) ?? null;
    if (!this.#storage.hasPending(key)) this.#grants.set(key, grant);
    return grant ?? undefined;
  }

  grantPending(agentId: string, peerAgentId: string): boolean {
    return this.#storage.hasPending(K.grant(agentId, peerAgentId));
  }

  grantDurable(agentId: string, peerAgentId: string): Promise<void> {
    return this.#storage.durable(K.grant(agentId, peerAgentId));
  }

  async grants(agentId: string | undefined, page: PageRequest<[agentId: string, peerAgentId: string]>): Promise<GrantRow[]> {
    const after = page.after === undefined ? undefined : K.grant(page.after[0], page.after[1]);
    return (await this.#page<GrantRow>(K.grantsPrefix(agentId), after, page.limit)).map((e) => e.value);
  }

  putGrant(grant: GrantRow): Promise<DirectoryOutcome> {
    const key = K.grant(grant.agentId, grant.peerAgentId);
    return this.#admit(
      () => [put(key, grant)],
      () => this.#grants.set(key, grant),
    );
  }

  deleteGrant(agentId: string, peerAgentId: string): Promise<DirectoryOutcome> {
    const key = K.grant(agentId, peerAgentId);
    return this.#admit(
      () => [{ type: 'del', key }],
      () => this.#grants.set(key, null),
    );
  }

  // ---- chats ----------------------------------------------------------------------------------

  chat(chatId: string): ChatRow | undefined {
    return this.#storage.get<ChatRow>(K.chat(chatId));
  }

  chatOfPair(agentAId: string, agentBId: string, view: View): string | undefined {
    const key = K.pair(agentAId, agentBId);
    return view === 'admitted' ? this.#storage.getAdmitted<string>(key) : this.#storage.get<string>(key);
  }

  pairDurable(agentAId: string, agentBId: string): Promise<void> {
    return this.#storage.durable(K.pair(agentAId, agentBId));
  }

  createChat(row: ChatRow, heads: readonly [StreamMeta, StreamMeta]): Promise<DirectoryOutcome> {
    return this.#admit(
      () => {
        const pairKey = K.pair(row.agentAId, row.agentBId);
        const existing = this.#storage.getAdmitted<string>(pairKey);
        if (existing !== undefined) return { status: 'duplicate', existing };
        this.#counters.chats++;
        this.#counters.streams += 2;
        return [
          put(K.chat(row.id), row),
          put(pairKey, row.id),
          put(K.member(row.agentAId, row.id), ''),
          put(K.member(row.agentBId, row.id), ''),
          streamMetaOp(heads[0]),
          streamMetaOp(heads[1]),
          this.#counters.op(),
        ];
      },
      undefined,
      heads.map((m) => ({ streamId: m.streamId, generation: m.generation, position: 0 })),
    );
  }

  async chatIds(agentId: string | undefined, page: PageRequest<string>): Promise<string[]> {
    const prefix = agentId === undefined ? K.chatsPrefix : K.membersPrefix(agentId);
    // Values are read too: their checksum covers the key, so a damaged key is caught here.
    const entries = await this.#page<unknown>(prefix, page.after === undefined ? undefined : prefix + page.after, page.limit);
    return entries.map(({ key }) => key.slice(prefix.length));
  }

  // ---- damage ---------------------------------------------------------------------------------

  async damaged(): Promise<{ tokenIndex: string[]; grants: string[] }> {
    return { tokenIndex: await damagedKeys(this.#storage, K.token('')), grants: await damagedKeys(this.#storage, K.grantsPrefix()) };
  }

  // ---- helpers --------------------------------------------------------------------------------

  /** Entries under `prefix` after the key `after` (exclusive), at most `limit`, in key order. */
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- the caller names the type it stored (as Storage.get)
  async #page<T>(prefix: string, after: string | undefined, limit: number): Promise<Array<{ key: string; value: T }>> {
    const start = after === undefined ? { gte: prefix } : { gt: after };
    const out: Array<{ key: string; value: T }> = [];
    for await (const entry of this.#storage.entries<T>({ ...start, lt: prefixEnd(prefix), limit })) out.push(entry);
    return out;
  }

  /**
   * Run `decide` (synchronous: the uniqueness check and the ops), queue its ops, and settle: ok
   * once durable (then `committed` runs), unknown when the synced write failed. READ_ONLY and
   * SHUTTING_DOWN reject with nothing written.
   */
  #admit(
    decide: () => WriteOp[] | DirectoryOutcome,
    committed?: () => void,
    touches: Array<{ streamId: string; generation: number; position: number }> = [],
  ): Promise<DirectoryOutcome> {
    let written: Promise<void>;
    try {
      this.#storage.assertWritable();
      const ops = decide();
      if (!Array.isArray(ops)) return Promise.resolve(ops);
      written = this.#storage.write(ops, touches);
    } catch (err) {
      return rejected(err);
    }
    return written.then(
      (): DirectoryOutcome => {
        committed?.();
        return { status: 'ok' };
      },
      (err: unknown): DirectoryOutcome => {
        if (err instanceof YelloError && err.type === 'STORAGE_FAILURE') return { status: 'unknown', error: err };
        throw err;
      },
    );
  }
}

/** A thrown value as a rejected promise (what the synchronous part of a call threw). */
function rejected(err: unknown): Promise<never> {
  return Promise.reject(err instanceof Error ? err : new Error(String(err)));
}
