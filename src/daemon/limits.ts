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

/** Default daemon-wide budget of answers in the making and unsent output (`--max-output-bytes`). */
export const DEFAULT_MAX_OUTPUT_BYTES = 32 * 1_048_576;

/** Default time from connecting to a successful `session.hello` (`--hello-timeout-ms`). */
export const DEFAULT_HELLO_TIMEOUT_MS = 5_000;

/** Default connections without a session at once (`--max-pending-hellos`). */
export const DEFAULT_MAX_PENDING_HELLOS = 64;

/** Default sessions one agent may hold at once (`--max-sessions-per-agent`). */
export const DEFAULT_MAX_SESSIONS_PER_AGENT = 64;

/**
 * Default per-agent quotas (docs/security.md "Quotas"): far above what a chatting agent does
 * (a few messages a second, a claim when its coordinator starts), far below what one agent
 * needs to fill the disk or the log for everyone. 0 turns a quota off.
 */
export const DEFAULT_QUOTAS = {
  appendRecordsPerSecond: 1_000,
  appendBytesPerSecond: 16 * 1_048_576,
  storedBytes: 4 * 1_073_741_824,
  claimsPerMinute: 60,
} as const;
