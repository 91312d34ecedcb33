import { YelloError } from '../../../shared/errors.js';
import { DirectoryKernel } from '../port/directory-kernel.js';
import type { DirectoryChange, DirectoryOutcome, PageRequest } from '../port/directory-port.js';
import type { AgentRow, ChatRow, GrantRow } from '../port/values.js';
import type { Counters } from './counters.js';
import { damagedKeys } from './damage-scan.js';
import { K, prefixEnd } from './key-layout.js';
import { put, type Storage, type WriteOp } from './storage.js';
import { streamMetaOp } from './stream-tables.js';

/**
 * The directory port on one local LevelDB (store/port/directory-port.ts): agents under `a/`,
 * usernames `u/`, the token index `t/`, grants `g/`, chats `c/`, pairs `p/`, memberships `m/`.
 * The admission (unique keys checked against admitted state, the pending overlay) is the port
 * kernel's (directory-kernel.ts); here are the committed reads and each write's batch. Committed
 * agent rows and grants are cached (every RPC checks a session, every append a grant).
 */
export class LevelDirectory extends DirectoryKernel {
  readonly #storage: Storage;
  readonly #counters: Counters;
  /** Committed agent rows by id (filled on read, refreshed on commit). */
  readonly #rows = new Map<string, AgentRow>();
  /** Committed grants (null: known absent) by key. */
  readonly #grants = new Map<string, GrantRow | null>();

  constructor(storage: Storage, counters: Counters) {
    super(storage.gate);
    this.#storage = storage;
    this.#counters = counters;
  }

  // ---- committed reads ------------------------------------------------------------------------

  protected _agent(agentId: string): AgentRow | undefined {
    const cached = this.#rows.get(agentId);
    if (cached) return cached;
    const row = this.#storage.get<AgentRow>(K.agent(agentId));
    if (row === undefined) return undefined;
    this.#rows.set(agentId, row);
    return row;
  }

  protected _agentIdByUsername(username: string): string | undefined {
    return this.#storage.get<string>(K.username(username));
  }

  protected _agentIdByToken(tokenHash: string): string | undefined {
    return this.#storage.get<string>(K.token(tokenHash));
  }

  protected async _agents(page: PageRequest<string>): Promise<AgentRow[]> {
    return (await this.#page<AgentRow>(K.agentsPrefix, page.after === undefined ? undefined : K.agent(page.after), page.limit)).map(
      (e) => e.value,
    );
  }

  protected _grant(agentId: string, peerAgentId: string): GrantRow | undefined {
    const key = K.grant(agentId, peerAgentId);
    const cached = this.#grants.get(key);
    if (cached !== undefined) return cached ?? undefined;
    const grant = this.#storage.get<GrantRow>(key) ?? null;
    this.#grants.set(key, grant);
    return grant ?? undefined;
  }

  protected async _grants(agentId: string | undefined, page: PageRequest<[agentId: string, peerAgentId: string]>): Promise<GrantRow[]> {
    const after = page.after === undefined ? undefined : K.grant(page.after[0], page.after[1]);
    return (await this.#page<GrantRow>(K.grantsPrefix(agentId), after, page.limit)).map((e) => e.value);
  }

  protected _chat(chatId: string): ChatRow | undefined {
    return this.#storage.get<ChatRow>(K.chat(chatId));
  }

  protected _chatOfPair(agentAId: string, agentBId: string): string | undefined {
    return this.#storage.get<string>(K.pair(agentAId, agentBId));
  }

  protected async _chatIds(agentId: string | undefined, page: PageRequest<string>): Promise<string[]> {
    const prefix = agentId === undefined ? K.chatsPrefix : K.membersPrefix(agentId);
    // Values are read too: their checksum covers the key, so a damaged key is caught here.
    const entries = await this.#page<unknown>(prefix, page.after === undefined ? undefined : prefix + page.after, page.limit);
    return entries.map(({ key }) => key.slice(prefix.length));
  }

  // ---- writes ---------------------------------------------------------------------------------

  /** The batch of an admitted write, queued; the cached committed rows follow it once durable. */
  protected _enqueue(change: DirectoryChange): Promise<DirectoryOutcome> {
    let ops: WriteOp[];
    let committed: (() => void) | undefined;
    let touches: Array<{ streamId: string; generation: number; position: number }> = [];
    switch (change.kind) {
      case 'createAgent': {
        const { row } = change;
        this.#counters.agents++;
        ops = [put(K.agent(row.id), row), put(K.username(row.username), row.id), put(K.token(row.tokenHash), row.id), this.#counters.op()];
        break;
      }
      case 'updateAgent': {
        const { row, previous } = change;
        ops = [put(K.agent(row.id), row)];
        if (row.tokenHash !== previous.tokenHash)
          ops.push({ type: 'del', key: K.token(previous.tokenHash) }, put(K.token(row.tokenHash), row.id));
        committed = () => this.#rows.set(row.id, row);
        break;
      }
      case 'putGrant': {
        const { grant } = change;
        const key = K.grant(grant.agentId, grant.peerAgentId);
        ops = [put(key, grant)];
        committed = () => this.#grants.set(key, grant);
        break;
      }
      case 'deleteGrant': {
        const key = K.grant(change.agentId, change.peerAgentId);
        ops = [{ type: 'del', key }];
        committed = () => this.#grants.set(key, null);
        break;
      }
      case 'createChat': {
        const { row, heads } = change;
        this.#counters.chats++;
        this.#counters.streams += 2;
        ops = [
          put(K.chat(row.id), row),
          put(K.pair(row.agentAId, row.agentBId), row.id),
          put(K.member(row.agentAId, row.id), ''),
          put(K.member(row.agentBId, row.id), ''),
          streamMetaOp(heads[0]),
          streamMetaOp(heads[1]),
          this.#counters.op(),
        ];
        touches = heads.map((m) => ({ streamId: m.streamId, generation: m.generation, position: 0 }));
        break;
      }
    }
    return this.#storage.write(ops, touches).then(
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

  // ---- damage ---------------------------------------------------------------------------------

  protected async _damaged(): Promise<{ tokenIndex: string[]; grants: string[] }> {
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
}
