import { z } from 'zod';
import { DECIMAL_PATTERN, ID_PATTERN, MESSAGE_ID_PATTERN } from './ids.js';
import { PII_MODES } from './types.js';

/**
 * The zod building blocks of the param schemas in the method table (src/shared/methods.ts).
 * Optional params accept `null` as "unset" (§4) and are normalised to `undefined`.
 */

const wellFormed = (s: string) => s.isWellFormed();
const WELL_FORMED = 'must be well-formed Unicode (no lone surrogates)';

/** Free text: any well-formed Unicode string. */
export const text = (max: number) => z.string().max(max).refine(wellFormed, WELL_FORMED);
/** A single-line label (names, reasons): no control line breaks. */
export const label = (max: number) => text(max).refine((s) => !/[\r\n]/.test(s), 'must not contain a line break');
/** Agent, chat, operation ids and usernames. */
export const id = () => z.string().regex(ID_PATTERN, 'must match ^[A-Za-z0-9_-]{1,128}$');
/** A canonical decimal position/generation/epoch string. */
export const decimal = () =>
  z.string().regex(DECIMAL_PATTERN, 'must be a canonical decimal string such as "0" or "17" (no sign, no leading zeros)');
/** `chatId:authorAgentId`. */
export const streamIdSchema = () => z.string().regex(/^[A-Za-z0-9_-]{1,128}:[A-Za-z0-9_-]{1,128}$/, 'must be chatId:authorAgentId');
/** An optional param: absent or `null` both mean unset, and become `undefined`. */
export const opt = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? undefined);
/** An opaque cursor string. */
export const cursor = () => z.string().min(1).max(4096);
/** A page size of 1..max. */
export const limit = (max: number) => z.number().int().min(1).max(max);
/** An outbound PII policy mode. */
export const piiMode = () => z.enum(PII_MODES);

/** A message record of `streams.append`. */
export const appendMessageSchema = z.strictObject({
  type: z.literal('chat.message'),
  messageId: z.string().regex(MESSAGE_ID_PATTERN, 'must match ^[A-Za-z0-9_.:@/-]{1,256}$'),
  content: text(262_144),
});
/** A receipt record of `streams.append`. */
export const appendReceiptSchema = z.strictObject({
  type: z.literal('chat.receipt'),
  peerStreamId: streamIdSchema(),
  peerGeneration: decimal(),
  nextPosition: decimal(),
  batchId: z.string().min(1).max(1024),
});
