/**
 * Identifier and number formats of docs/protocol.md §4. Positions, generations and epochs travel
 * as canonical decimal strings; inside the daemon they are plain numbers (safe integers).
 */
export const ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;
/** Message ids may also contain `.:@/` and be up to 256 characters. */
export const MESSAGE_ID_PATTERN = /^[A-Za-z0-9_.:@/-]{1,256}$/;
/** Canonical decimal: no sign, no leading zeros, no exponent. */
export const DECIMAL_PATTERN = /^(0|[1-9][0-9]{0,15})$/;

/** Parse a canonical decimal string known to be valid (schemas check the form). */
export function parseDecimal(value: string): number {
  return Number(value);
}

/** Format a position/generation/epoch number as its canonical decimal string. */
export function formatDecimal(value: number): string {
  return String(value);
}

/** `streamId = chatId + ":" + authorAgentId`. */
export function makeStreamId(chatId: string, authorAgentId: string): string {
  return `${chatId}:${authorAgentId}`;
}

/** Split a streamId into its chat and author, or null when it is not of that shape. */
export function splitStreamId(streamId: string): { chatId: string; authorAgentId: string } | null {
  const i = streamId.indexOf(':');
  if (i <= 0 || i !== streamId.lastIndexOf(':')) return null;
  const chatId = streamId.slice(0, i);
  const authorAgentId = streamId.slice(i + 1);
  if (!ID_PATTERN.test(chatId) || !ID_PATTERN.test(authorAgentId)) return null;
  return { chatId, authorAgentId };
}
