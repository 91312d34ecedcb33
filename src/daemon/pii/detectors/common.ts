// What every detector shares: the result types, the candidate a detector reports, the ranks
// that break ties, the boundary fragments of numeric and token shapes, and the scan loop.
// The detectors themselves are in the sibling modules; pii-detectors.ts runs them.

/** The kinds of sensitive content the outbound policy recognises. */
export type PiiKind =
  'EMAIL' | 'PHONE' | 'PAYMENT_CARD' | 'SSN' | 'IBAN' | 'PRIVATE_KEY' | 'API_KEY' | 'BEARER_TOKEN' | 'JWT' | 'IP_ADDRESS';

/** One detected span: UTF-16 offsets into the scanned text, `end` exclusive. */
export interface PiiMatch {
  kind: PiiKind;
  start: number;
  end: number;
}

/**
 * A detector hit before overlap resolution. `kind: null` is a *claim*: a span that has the
 * exact shape of a checksummed identifier (card, IBAN, SSN) but fails its check. Claims win
 * overlaps like real matches and are then dropped, so e.g. a 16-digit order number that fails
 * Luhn is reported as nothing at all rather than as a phone number hiding inside it.
 */
export interface Candidate {
  kind: PiiKind | null;
  start: number;
  end: number;
  rank: number;
}

// Lower rank = more specific; used only to break ties between equally long overlapping spans.
export const RANK = {
  PRIVATE_KEY: 0,
  JWT: 1,
  API_KEY: 2,
  BEARER_TOKEN: 3,
  IBAN: 4,
  PAYMENT_CARD: 5,
  SSN: 6,
  EMAIL: 7,
  IP_ADDRESS: 8,
  PHONE: 9,
  GENERIC_SECRET: 10,
} as const;

// ---------------------------------------------------------------------------------------------
// Shared boundaries for numeric shapes.
//
// A number must not continue a word, a longer number, a decimal fraction or a dashed/dotted
// identifier: "v1.4155550100", "ID-4155550100", "0.4111111111111111", the tail of a UUID or a
// date. ASCII-only on purpose: CJK text routinely writes digits directly after ideographs
// ("电话13800138000"), and treating those as word characters would hide real numbers.
// Left and right are mirror images so that redacting a neighbour never changes the verdict
// (which keeps redaction idempotent). A comma is a boundary on both sides: CSV rows of card
// numbers matter more than decimals written with a comma and 13+ fraction digits.
export const NUM_L = String.raw`(?<![\w+])(?<![\w][.\-])`;
export const NUM_R = String.raw`(?![\w])(?![.\-][\w])`;
// Phone numbers additionally never start right after another digit group: without this the
// tail of one number ("…555 0100 123-45-6789") reads as a trunk-prefixed national number.
export const PHONE_L = NUM_L + String.raw`(?<![0-9][ \u00A0\u202F.\-])`;
// Same idea for opaque tokens (keys, JWTs): they must not be a slice of a longer token.
export const TOK_L = String.raw`(?<![A-Za-z0-9_\-])`;
export const TOK_R = String.raw`(?![A-Za-z0-9_\-])`;
// Space-like and punctuation separators that people put inside phone and card numbers.
export const SP = String.raw`[ \u00A0\u202F]`;
export const SEP = String.raw`[ \u00A0\u202F.\-]`;

export function re(source: string, flags: string): RegExp {
  return new RegExp(source, flags);
}

/** A detector's necessary condition (see "Prefilter triggers" in pii-detectors.ts, where the regexes are). */
export type PiiTrigger = 'DIGIT' | 'AT' | 'PEM' | 'JWT' | 'BEARER' | 'VENDOR_KEY' | 'IPV6';

/**
 * Runs a global regex over `text`, calling `onMatch` for each hit. `onMatch` returns the end
 * of the span it accepted (which may be shorter than the hit), or `false`. The scan resumes
 * at the accepted end, or one character after a rejected hit's start so that a greedy but
 * invalid candidate cannot hide a valid one that starts inside it. That resumption is only
 * linear because every pattern passed here is either bounded or start-anchored by a lookbehind.
 */
export function scan(pattern: RegExp, text: string, onMatch: (m: RegExpExecArray) => number | false): void {
  pattern.lastIndex = 0;
  for (let m = pattern.exec(text); m !== null; m = pattern.exec(text)) {
    const end = onMatch(m);
    pattern.lastIndex = end === false ? m.index + 1 : Math.max(end, m.index + 1);
  }
}

export function groupSpan(m: RegExpExecArray, group: number): [number, number] | undefined {
  return m.indices?.[group];
}

/** Records a candidate and returns its end, the shape `scan` callbacks answer with. */
export function add(out: Candidate[], kind: PiiKind | null, start: number, end: number, rank: number): number {
  out.push({ kind, start, end, rank });
  return end;
}
