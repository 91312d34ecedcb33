// The outcome of `verifyExport` (what it can report, and where), shared by its stages.

/**
 * What `verifyExport` can find wrong, as stable strings (the `problem` texts are for people):
 * - `NOT_JSON`, `NOT_A_RECORD`: a line that is not JSON, or neither a stored record nor a checkpoint line.
 * - `CONTENT_HASH`, `SIGNATURE`, `UNKNOWN_KID`: a message's own checks (§5.4).
 * - `WRONG_STREAM`: a record or checkpoint whose ids disagree with its `streamId`, of another
 *   chat than the rest of the export, or of a third stream.
 * - `POSITION`: positions are not exactly the checkpoint's `firstPosition` .. `nextPosition - 1`
 *   (a gap, a repeat, records missing at either end or past it).
 * - `CREATED_AT_ORDER`: a message older than the message before it in its stream generation.
 * - `REPLAY`: a signature value that already appeared on another line.
 * - `CLIENT_MESSAGE_ID`: a malformed `clientMessageId`, or one used twice in a stream generation.
 * - `OPERATION`: records of one operation that are not consecutive with recordIndex 0, 1, …,
 *   an operationId used again later in its stream, or a fence whose operationId is not `fence.<epoch>`.
 * - `RECEIPT`: a receipt for another stream than the chat's other one, or one that does not
 *   move forward within its stream generation, or one that provably existed when the export's
 *   checkpoint of that peer stream generation was taken and acknowledges positions beyond it
 *   (acknowledged records are missing).
 * - `AFTER_CHECKPOINT`: a record after its stream generation's checkpoint line.
 * - `NO_CHECKPOINT`: records of a stream generation without a checkpoint: their completeness and
 *   order cannot be proved (an export made before checkpoints existed: export it again).
 * - `MISSING_STREAM`: the export has nothing of the chat's other stream, which its records name;
 *   `EMPTY`: the export has no records and no checkpoints.
 * - `CHECKPOINT_INVALID`, `CHECKPOINT_SIGNATURE`: a malformed or repeated checkpoint, or one
 *   whose signature (or kid: `UNKNOWN_KID`) does not verify.
 * - `CHAIN_DIGEST`: the records of a checkpoint's range do not hash to its `chainDigest`:
 *   something in the range was changed, swapped, replaced or renumbered. The digest covers the
 *   whole range, so this problem names the range; the other checks name positions where they can.
 */
export type ExportProblemKind =
  | 'NOT_JSON'
  | 'NOT_A_RECORD'
  | 'CONTENT_HASH'
  | 'SIGNATURE'
  | 'UNKNOWN_KID'
  | 'WRONG_STREAM'
  | 'POSITION'
  | 'CREATED_AT_ORDER'
  | 'REPLAY'
  | 'CLIENT_MESSAGE_ID'
  | 'OPERATION'
  | 'RECEIPT'
  | 'AFTER_CHECKPOINT'
  | 'NO_CHECKPOINT'
  | 'MISSING_STREAM'
  | 'EMPTY'
  | 'CHECKPOINT_INVALID'
  | 'CHECKPOINT_SIGNATURE'
  | 'CHAIN_DIGEST';

/** One problem of an export, with where it is: 1-based line (0 for the export as a whole), stream, generation and position when known. */
export interface ExportProblem {
  line: number;
  streamId: string | null;
  generation: string | null;
  position: string | null;
  kind: ExportProblemKind;
  problem: string;
}

/** What the export holds of one stream generation. */
export interface ExportGeneration {
  streamId: string;
  generation: string;
  /** Positions of the records found (null when there are none). */
  firstPosition: string | null;
  nextPosition: string | null;
  records: number;
  /** The checkpoint line that closes it, or null when there is none. */
  checkpoint: { line: number; firstPosition: string; nextPosition: string; createdAt: string; kid: string } | null;
}

/** The outcome of `verifyExport`: counts, what each stream generation holds, and every problem found. */
export interface ExportVerification {
  records: number;
  messages: number;
  checkpoints: number;
  generations: ExportGeneration[];
  problems: ExportProblem[];
}

/** Where a problem is. */
export interface Where {
  line: number;
  streamId: string | null;
  generation: string | null;
  position: string | null;
}

/** Where a record is: records always have a position. */
export type RecordWhere = Where & { position: string };

/** How a stage of the check reports a problem. */
export type Report = (at: Where, kind: ExportProblemKind, problem: string) => void;

/** `a` or `a..b`, for naming positions in a problem. */
export const range = (a: bigint, b: bigint): string => (a === b ? `${a}` : `${a}..${b}`);
