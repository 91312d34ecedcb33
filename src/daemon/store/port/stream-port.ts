/**
 * The streams half of the storage port (docs/design/storage-port.md, "The port: decisions in
 * memory, commits conditional").
 *
 * The domain (src/daemon/streams/) decides every change on a head it holds in memory, in the
 * order of docs/protocol.md §6, and hands the port one *change* with the head it decided on as a
 * precondition. The port admits the change, groups it with the others of the same turn into one
 * durable commit, and answers with an outcome. LevelDB (one daemon owns the store) satisfies the
 * preconditions from its overlay of admitted writes; PostgreSQL checks them inside the
 * transaction, where another daemon may have moved the head.
 *
 * Conventions of every method below:
 * - Positions and generations are plain numbers (safe integers); a stream's records of one
 *   generation occupy `[firstPosition, nextPosition)` with no gap.
 * - "admitted" state includes changes whose commit has not finished yet (the next decision is
 *   taken against it); "committed" state is what is durable and may be shown to readers.
 * - A value that fails its check (checksum, unreadable row) throws STORAGE_FAILURE with reason
 *   CORRUPT naming where it is (errors.corrupt); nothing is ever silently skipped or replaced.
 * - A store that is closing throws STORAGE_FAILURE/SHUTTING_DOWN on every read and write.
 */
import type { StoredOperation, StoredRecord, StreamMeta } from './values.js';

/** What one decided change of a stream relied on: the head it was decided against. */
export interface HeadPrecondition {
  streamId: string;
  generation: number;
  nextPosition: number;
  writerEpoch: number;
}

/** The precondition of a change decided on `meta`. */
export function expectOf(meta: StreamMeta): HeadPrecondition {
  return { streamId: meta.streamId, generation: meta.generation, nextPosition: meta.nextPosition, writerEpoch: meta.writer.epoch };
}

/**
 * What an agent's change relied on besides the head: the session it was made in, and for an
 * append under policy `grants` the grant from author to peer. Where other processes write the
 * directory too (PostgreSQL), the commit checks them in its transaction, so a revocation
 * committed through any daemon refuses every change that reaches the database after it
 * (`denied`), whatever this daemon's memory still says. Where memory is the store (LevelDB) the
 * checks made at admission are already exact: the port ignores it.
 */
export interface ChangeAdmission {
  /** The author, whose token must still be `tokenHash` and who must not be disabled. */
  agentId: string;
  /** The hash of the token the caller's session was opened with. */
  tokenHash: string;
  /** Whether the grant from the author to the stream's peer must exist (an append under policy `grants`). */
  grant: boolean;
}

/** Chat, author and peer of a stream: what its stored records do not repeat. */
export type StreamIdentity = Pick<StreamMeta, 'streamId' | 'chatId' | 'authorAgentId' | 'peerAgentId'>;

/**
 * `streams.append`: `records` at `[expect.nextPosition, next.nextPosition)` of generation
 * `next.generation`, its operation (its id unique in the stream, forever while its records
 * exist), the operation-log entry at its first position, and its clientMessageIds (unique per
 * stream generation) at their positions.
 */
export interface AppendChange {
  kind: 'append';
  expect: HeadPrecondition;
  next: StreamMeta;
  records: StoredRecord[];
  operation: StoredOperation;
  messageIds: Array<[clientMessageId: string, position: number]>;
  /**
   * Resolves when every record is final (message signatures are filled into `records` in place
   * by then): the backend serializes records only after it. Rejection fails the whole group
   * with an unknown outcome, as a failed write does.
   */
  ready: Promise<void> | null;
  /** The session (and grant) the append relied on, checked in the commit where the directory is shared. */
  admission?: ChangeAdmission;
}

/** `streams.claim`: the new writer (epoch + 1) and its `chat.writer-fence` record at `expect.nextPosition`. */
export interface ClaimChange {
  kind: 'claim';
  expect: HeadPrecondition;
  next: StreamMeta;
  fence: StoredRecord;
  /** The claiming agent's session, checked in the commit where the directory is shared. */
  admission?: ChangeAdmission;
}

/** `streams.release`: the writer becomes inactive (`next.writer`); no record. */
export interface ReleaseChange {
  kind: 'release';
  expect: HeadPrecondition;
  next: StreamMeta;
  /** The releasing agent's session (none for the admin), checked in the commit where the directory is shared. */
  admission?: ChangeAdmission;
}

/**
 * `streams.trim`: `next.firstPosition` moves up; the records of the current generation below it
 * are gone for readers once this commits. The backend deletes them (and the operations, log
 * entries and message ids that lie wholly below) now or later (`sweepTrimmed`); readers never
 * see them again either way.
 */
export interface TrimChange {
  kind: 'trim';
  expect: HeadPrecondition;
  next: StreamMeta;
  /**
   * The retained start before the trim (`next.firstPosition` is the one after it). Part of the
   * precondition: a head whose retained start moved meanwhile makes the trim `stale`.
   */
  fromPosition: number;
}

/**
 * `streams.reset`: the current generation is sealed (`next.sealed`) and the next starts at 0.
 * `expect` is null only for a head rebuilt from its records after the stored one failed its
 * check: the change then replaces whatever head is stored.
 */
export interface ResetChange {
  kind: 'reset';
  expect: HeadPrecondition | null;
  next: StreamMeta;
}

export type StreamChange = AppendChange | ClaimChange | ReleaseChange | TrimChange | ResetChange;

/**
 * What became of a change.
 * - `ok`: durable (fsync / COMMIT returned); the head is `next`.
 * - `stale`: nothing written; the stored head no longer matches `expect` (another writer moved
 *   it). `head` is the current one (undefined: the stream is gone); the domain decides again on
 *   it, which answers POSITION_MISMATCH, FENCED or a replay as the contract says.
 * - `duplicate`: nothing written; a unique key was taken first: the operation id (with the
 *   operation that holds it), or a clientMessageId of this generation (with its position).
 * - `denied`: nothing written; the store's directory refused the change's `admission` at commit
 *   time: `session` (the token was rotated or the agent disabled) or `grant` (revoked). Only
 *   where the directory is shared (PostgreSQL); answered as UNAUTHENTICATED or NO_GRANT.
 * - `unknown`: the commit may or may not be durable (a failed fsync, a connection lost during
 *   COMMIT). `error` is the STORAGE_FAILURE/WRITE_FAILED to answer with; `operations.get`
 *   settles it later (after a restart on LevelDB, after the reconnect on PostgreSQL). Never
 *   "nothing written".
 */
export type CommitOutcome =
  | { status: 'ok' }
  | { status: 'stale'; head: StreamMeta | undefined }
  | { status: 'duplicate'; what: 'operation'; operation: StoredOperation }
  | { status: 'duplicate'; what: 'messageId'; clientMessageId: string; position: number }
  | { status: 'denied'; reason: 'session' | 'grant' }
  | { status: 'unknown'; error: Error };

/** A change refused at admission, decided in memory: nothing admitted, nothing written. */
export type AdmissionRefusal = Extract<CommitOutcome, { status: 'stale' | 'duplicate' }>;

/** An admitted change: `durable` settles with its outcome once its group commit did (never rejects for a storage failure). */
export interface Ticket<O> {
  status: 'admitted';
  durable: Promise<O>;
}

/** What `admit` answers: a ticket, or a refusal. */
export type Admission = Ticket<CommitOutcome> | AdmissionRefusal;

/** The outcome of an admission: its refusal at once, or its commit's once durable. */
export function outcomeOf<O extends { status: string }>(admission: Ticket<O> | O): Promise<O> {
  return admission.status === 'admitted' ? (admission as Ticket<O>).durable : Promise.resolve(admission as O);
}

/** A record read back, with the bytes it takes in the store (for read limits). */
export interface StoredRecordAt {
  position: number;
  record: StoredRecord;
  bytes: number;
}

/** An operation-log entry: the operation that begins at `position` of `generation`. */
export interface OpLogEntry {
  generation: number;
  position: number;
  operationId: string;
}

/** What an operation id is known as, for `operations.get` (docs/protocol.md §6.10). */
export type OperationStatus =
  | { state: 'committed'; operation: StoredOperation }
  /** Admitted and waiting for its commit, or its commit failed and only a restart/reconnect tells. */
  | { state: 'pending' }
  | { state: 'absent' };

/** What `sweepTrimmed` removed. */
export interface SweepResult {
  records: number;
  operations: number;
  messageIds: number;
}

export interface StreamPort {
  // ---- heads: synchronous, from memory ------------------------------------------------------

  /**
   * The head of a stream, admitted (with changes not yet durable) or committed, or undefined when
   * the stream does not exist. Synchronous: the backend keeps heads in memory (LevelDB reads
   * them with a synchronous point read and caches them; PostgreSQL loads every head at open and
   * refreshes it from `changes()` and from stale outcomes). A head that fails its check throws
   * CORRUPT. The caller must not mutate the value (clone it: stream-meta.ts `cloneMeta`).
   */
  head(streamId: string, view: 'admitted' | 'committed'): StreamMeta | undefined;

  /** Whether a change of the head is admitted and not yet durable. */
  headPending(streamId: string): boolean;

  /**
   * Re-read a committed head from the store, for a backend whose heads in memory are a cache
   * of a store other processes write too (PostgreSQL: another daemon's commit is heard by its
   * notice, which may not have arrived). A refusal decided on the cached head (FENCED,
   * POSITION_MISMATCH, WRITER_ACTIVE, a trim beyond the head) is confirmed on the re-read head
   * before it is answered (streams/heads.ts `movedSince`). Absent where memory is the store (LevelDB).
   */
  reloadHead?(streamId: string): Promise<void>;

  /**
   * The backend's check of a committed head against its records, asked once per stream and
   * process on first load (synchronous): null when they agree, else where the head cannot be
   * vouched for and why; the domain marks the stream corrupt from there (store/integrity.ts), so
   * nothing is written over a position that may hold an acknowledged record. LevelDB looks for
   * the head's last record, its operation, nothing at or past the head, nothing in a later
   * generation (a lost log tail). A backend that writes head and records in one transaction may
   * always answer null.
   */
  verifyHead(meta: StreamMeta): { fromPosition: number; detail: string } | null;

  /** Every stored stream id, in id order (retention runs, the startup head check, counts). */
  streamIds(): AsyncIterable<string>;

  // ---- admission lookups ----------------------------------------------------------------------

  /**
   * Make `operation()` and `messagePosition()` exact for these ids of `streamId` (admitted
   * state). LevelDB answers null: its lookups are synchronous reads already, and an append
   * decides without awaiting anything. A backend that must fetch first returns a promise the
   * appender awaits before its checks; what another daemon commits after it is caught by the
   * commit (`duplicate`).
   */
  prepare(streamId: string, operationId: string, clientMessageIds: readonly string[]): Promise<void> | null;

  /**
   * Whether `operation()` and `messagePosition()` are exact only after `prepare` (PostgreSQL).
   * Such a backend's commit still refuses a taken operation id or message id (`duplicate`, from
   * its unique keys), so the appender decides first without the lookup and looks up only to
   * decide again a request it would refuse (a replay answers before every refusal but the
   * author's and the stream's, docs/protocol.md §6).
   */
  readonly lookupsNeedPrepare: boolean;

  /** An operation as admitted in this stream (synchronous; exact after `prepare`), or undefined. */
  operation(streamId: string, operationId: string): StoredOperation | undefined;

  /** The position of a clientMessageId in a generation as admitted (synchronous; exact after `prepare`). */
  messagePosition(streamId: string, generation: number, clientMessageId: string): number | undefined;

  // ---- admission ------------------------------------------------------------------------------

  /**
   * Admit a change, synchronously: the gate (STORAGE_FAILURE/READ_ONLY once a commit's outcome
   * was unknown, SHUTTING_DOWN once the store is closing: thrown, nothing written), then `expect`
   * against the admitted head (`stale` with that head when it does not match), then the unique
   * keys against admitted and known operations and message ids (the operation id first, then each
   * clientMessageId in order: `duplicate`), then the change joins the pending overlay and the next
   * group commit. Synchronous on purpose: the caller's checks, these and the admission are one
   * step, so two changes decided on one head are never both admitted; an `await` between the
   * caller's decision and this call would let them be.
   *
   * An admitted change comes back as a ticket whose `durable` settles once its group commit did:
   * `ok` (durable; the head is `next`), or, where other processes write the same store, `stale`,
   * `duplicate` or `denied` decided by the commit, or `unknown` (the store turns read-only until
   * restart, LevelDB, or until it has reconnected and reloaded its heads, PostgreSQL: nothing is
   * retried silently). Changes commit in admission order; a refused change refuses only itself.
   */
  admit(change: StreamChange): Admission;

  /** Resolves when every admitted change of the stream's head is durable (answering from admitted state). */
  headDurable(streamId: string): Promise<void>;

  /** Resolves when the admitted operation is durable (a replay answers only what a crash cannot undo). */
  operationDurable(streamId: string, operationId: string): Promise<void>;

  // ---- reads (committed state, asynchronous) ---------------------------------------------------

  /**
   * The committed records of `[from, end)` of one generation, in position order (reverse: from
   * `end - 1` down), at most `limit`. Exactly what is stored: a position with no record is not
   * yielded, and the caller reports a hole below the head as corruption (never a skip).
   */
  records(
    stream: StreamIdentity,
    generation: number,
    from: number,
    end: number,
    options?: { reverse?: boolean; limit?: number },
  ): AsyncIterable<StoredRecordAt>;

  /** One committed record, or undefined. */
  record(stream: StreamIdentity, generation: number, position: number): Promise<StoredRecord | undefined>;

  /**
   * Every stored record of a stream, all generations, in (generation, position) order; a record
   * that fails its check comes back with `record: undefined` instead of throwing (head rebuilds).
   */
  allRecords(stream: StreamIdentity): AsyncIterable<{ generation: number; position: number; record: StoredRecord | undefined }>;

  /** What `operations.get` says of an id: committed (with the operation), pending, or absent. */
  operationStatus(streamId: string, operationId: string): Promise<OperationStatus>;

  /** A committed operation, or undefined. */
  findOperation(streamId: string, operationId: string): Promise<StoredOperation | undefined>;

  /**
   * The operation log in commit order: entries after `after` (exclusive), up to `before`
   * (exclusive, same ordering by generation then position), at most `limit`.
   */
  opLog(
    streamId: string,
    range?: { after?: { generation: number; position: number }; before?: { generation: number; position: number }; limit?: number },
  ): AsyncIterable<OpLogEntry>;

  /** Committed operation ids of a stream and clientMessageIds of a generation (negative indexes). */
  operationIds(streamId: string): AsyncIterable<string>;
  messageIds(streamId: string, generation: number): AsyncIterable<string>;

  // ---- housekeeping ----------------------------------------------------------------------------

  /**
   * Delete what the trimmed prefix of the current generation left behind: records below
   * `firstPosition` not yet deleted, operations (and their log entries, together) whose records
   * all lie below it, message ids of trimmed messages. An operation cut in two by the trim
   * stays. Idempotent; each step is durable before the promise resolves.
   */
  sweepTrimmed(streamId: string, generation: number, firstPosition: number): Promise<SweepResult>;

  /** The backend's estimate of the bytes a stream's records take (quotas; never exact). */
  approximateBytes(streamId: string): Promise<number>;
}
