/**
 * Byte budgets that bound what one connection can make the daemon hold (docs/security.md
 * "Limits", docs/protocol.md §3.2). Every answer and notification is bounded: pages by
 * PAGE_BYTES, batches by element count and answer bytes, and whatever a client leaves unread
 * by WRITE_HIGH_WATER (nothing new starts) and the hard cap (the connection is closed).
 */

/** Records per page of `chats.history` and `streams.read` (default and most `maxBytes`): always at least one record. */
export const PAGE_BYTES = 1_048_576;

/** Unsent output above which a connection starts no new request and gets no new delivery. */
export const WRITE_HIGH_WATER = 1_048_576;

/**
 * Page budget shared by the answers a connection has in the making: a page is cut at what is
 * left of it after the unsent output and the other pages being made (at least one record), so
 * 16 pipelined reads owe about this much, not 16 pages.
 */
export const OUTPUT_WINDOW = 4 * 1_048_576;

/** Default hard cap on unsent output (`--max-unsent-bytes`): past it after a write, the connection is closed. */
export const DEFAULT_MAX_UNSENT_BYTES = 16 * 1_048_576;

/** Requests in one batch once the connection has a session. */
export const MAX_BATCH_ELEMENTS = 64;

/** Requests in one batch before `session.hello` succeeded: keeps the error output of one line small. */
export const MAX_BATCH_ELEMENTS_UNAUTHENTICATED = 16;

/** Answer bytes of one batch after which its remaining elements are not run (REQUEST_TOO_LARGE each). */
export const BATCH_ANSWER_BYTES = 1_048_576;
