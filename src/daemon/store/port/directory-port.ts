/**
 * The directory half of the storage port: agents, usernames, the token index, grants, chats
 * (one per pair) and chat membership (docs/design/storage-port.md).
 *
 * Reads the daemon decides on are synchronous and come from memory: every RPC authenticates
 * against an agent row, every append checks a grant. LevelDB reads them with synchronous point
 * reads through its overlay of admitted writes (and caches rows); PostgreSQL loads the tables at
 * open and keeps them current from its own commits and `changes()`.
 *
 * Writes are admitted synchronously (directory-kernel.ts): the uniqueness a write relies on (a
 * username, a pair) is checked against admitted state in the same call that admits it, so two
 * writes can never both take one unique key; the call answers a ticket whose `durable` settles
 * once the write is durable, or the refusal `duplicate`. A unique key taken by another daemon
 * first is a `duplicate` outcome of the commit, never a second row. Refusals and failures are as
 * for `StreamPort.admit`: READ_ONLY / SHUTTING_DOWN thrown with nothing written, and a failed
 * commit is `unknown` (STORAGE_FAILURE/WRITE_FAILED), after which the store is read-only.
 * Values that fail their check throw STORAGE_FAILURE/CORRUPT.
 */
import type { Ticket } from './stream-port.js';
import type { AgentRow, ChatRow, GrantRow, StreamMeta } from './values.js';

/** What became of a directory write. */
export type DirectoryOutcome =
  | { status: 'ok' }
  /** Nothing written: the unique key is taken (by `existing`: the agent id of a username, the chat id of a pair). */
  | { status: 'duplicate'; existing: string }
  | { status: 'unknown'; error: Error };

/** What a directory write's admission answers: a ticket, or the unique key taken in admitted state. */
export type DirectoryAdmission = Ticket<DirectoryOutcome> | { status: 'duplicate'; existing: string };

/** A directory write, as admitted and handed to the backend's group commit. */
export type DirectoryChange =
  | { kind: 'createAgent'; row: AgentRow }
  | { kind: 'updateAgent'; row: AgentRow; previous: AgentRow }
  | { kind: 'putGrant'; grant: GrantRow }
  | { kind: 'deleteGrant'; agentId: string; peerAgentId: string }
  | { kind: 'createChat'; row: ChatRow; heads: readonly [StreamMeta, StreamMeta] };

/** Admitted or committed: as for `StreamPort.head`. */
export type View = 'admitted' | 'committed';

/** Rows to read again (`reload`). */
export interface DirectoryRows {
  agents?: readonly string[];
  tokens?: readonly string[];
  grants?: ReadonlyArray<readonly [agentId: string, peerAgentId: string]>;
  chats?: readonly string[];
}

/** A page of a list: at most `limit` entries after `after` (exclusive) in the list's order. */
export interface PageRequest<A> {
  after?: A;
  limit: number;
}

export interface DirectoryPort {
  // ---- agents -----------------------------------------------------------------------------

  /** An agent row, or undefined. */
  agent(agentId: string, view: View): AgentRow | undefined;

  /** Whether a write of the agent's row is admitted and not yet durable. */
  agentPending(agentId: string): boolean;

  /** The agent id holding a username (committed), or undefined. */
  agentIdByUsername(username: string, view: View): string | undefined;

  /**
   * The agent id a token hash belongs to (committed index), or undefined. A disabled agent's
   * token may be in no index (PostgreSQL deletes it: its commits check the token row); callers
   * check the row's `disabled` either way.
   */
  agentIdByToken(tokenHash: string): string | undefined;

  /** A page of agent rows in id order (`agents.list`). */
  agents(page: PageRequest<string>): Promise<AgentRow[]>;

  /**
   * A new agent with its username and token index entry, atomically. `duplicate` (with the
   * holder's id) when the username is taken in admitted state.
   */
  createAgent(row: AgentRow): DirectoryAdmission;

  /**
   * Replace an existing agent's row (disable, PII mode, a new token hash). When the token hash
   * changed, the old index entry goes and the new one comes in the same commit. The username
   * never changes.
   */
  updateAgent(row: AgentRow, previous: AgentRow): DirectoryAdmission;

  // ---- grants -------------------------------------------------------------------------------

  /** The grant letting `agentId` talk to `peerAgentId`, or undefined. */
  grant(agentId: string, peerAgentId: string, view: View): GrantRow | undefined;

  /** Whether a write of that grant is admitted and not yet durable. */
  grantPending(agentId: string, peerAgentId: string): boolean;

  /** Resolves when an admitted write of the grant is durable. */
  grantDurable(agentId: string, peerAgentId: string): Promise<void>;

  /**
   * A page of grants ordered by (agentId, peerAgentId); only `agentId`'s when given. `after` is
   * the (agentId, peerAgentId) of the last entry of the previous page.
   */
  grants(agentId: string | undefined, page: PageRequest<[agentId: string, peerAgentId: string]>): Promise<GrantRow[]>;

  /** Store a grant (overwrites the same direction's grant). */
  putGrant(grant: GrantRow): DirectoryAdmission;

  /** Delete a grant. */
  deleteGrant(agentId: string, peerAgentId: string): DirectoryAdmission;

  // ---- chats --------------------------------------------------------------------------------

  /** A chat row (committed), or undefined. */
  chat(chatId: string): ChatRow | undefined;

  /** The chat id of a pair (`agentAId < agentBId`), or undefined. */
  chatOfPair(agentAId: string, agentBId: string, view: View): string | undefined;

  /** Resolves when an admitted chat of the pair is durable (create-or-find answers only durable chats). */
  pairDurable(agentAId: string, agentBId: string): Promise<void>;

  /**
   * Create-or-find, the create half: the chat row, its pair entry, both memberships and both
   * stream heads (`heads`, generation 1, empty) in one commit. `duplicate` with the existing
   * chat's id when the pair already has a chat (admitted here, or committed by another daemon):
   * there is never a second chat per pair.
   */
  createChat(row: ChatRow, heads: readonly [StreamMeta, StreamMeta]): DirectoryAdmission;

  /** A page of chat ids: every chat (agentId undefined) or the chats `agentId` is in, in chat id order. */
  chatIds(agentId: string | undefined, page: PageRequest<string>): Promise<string[]>;

  // ---- a directory other processes write too -------------------------------------------------

  /**
   * Whether a session's token is still its agent's current one and the agent enabled, as the
   * store has it now: another daemon may have rotated or disabled it unheard (PostgreSQL). Every
   * call of an agent session is confirmed so before it is answered. Rejects with
   * STORAGE_FAILURE/UNAVAILABLE when the store does not answer in time. Absent where memory is
   * the store (LevelDB): the synchronous rows are exact there.
   */
  confirmSession?(agentId: string, tokenHash: string): Promise<boolean>;

  /**
   * Read these rows again from the store (committed), for a backend whose rows in memory are a
   * cache of a store other processes write too: a refusal decided on a row's absence
   * (NOT_FOUND, NO_GRANT, an unknown token) is confirmed with this before it is answered.
   * `agents` may name agents by id or by username. Absent where memory is the store (LevelDB).
   */
  reload?(rows: DirectoryRows): Promise<void>;

  // ---- damage -------------------------------------------------------------------------------

  /**
   * Read the token index and the grants whole once (startup) and name the entries that fail
   * their check: an absent grant or an unknown token cannot be trusted while one exists.
   * Backends whose rows cannot be silently misplaced return empty lists.
   */
  damaged(): Promise<{ tokenIndex: string[]; grants: string[] }>;
}
