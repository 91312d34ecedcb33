/**
 * Outbound PII and secret detectors (docs/protocol.md §7).
 *
 * Every detector is a regular expression plus, where a checksum or a structural rule exists,
 * a small validator in code. Two rules keep the whole pass linear in the input length, which
 * matters because message content may be 256 KiB of attacker-chosen text:
 *
 * 1. A pattern whose length is unbounded (PEM body, JWT segments) may only start at a
 *    position that a lookbehind proves is the start of its run, and its repeated parts are
 *    unambiguous (each iteration begins with a character no other iteration can begin with),
 *    so one start scans its run once and a failing match backtracks in O(run).
 * 2. Every other pattern has bounded repetition (`{m,n}`), so each start position costs O(1).
 *
 * Each detector also names a *trigger* (see "Prefilter triggers"): text the trigger does not
 * match cannot produce that detector's candidates, so most messages skip most detectors.
 *
 * See docs/pii.md for what is detected, the disambiguation rules and the known limits.
 */

/** The kinds of sensitive content the outbound policy recognises. */
export type PiiKind = 'EMAIL' | 'PHONE' | 'PAYMENT_CARD' | 'SSN' | 'IBAN' | 'PRIVATE_KEY' | 'API_KEY' | 'BEARER_TOKEN' | 'JWT';

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
interface Candidate {
  kind: PiiKind | null;
  start: number;
  end: number;
  rank: number;
}

// Lower rank = more specific; used only to break ties between equally long overlapping spans.
const RANK = {
  PRIVATE_KEY: 0,
  JWT: 1,
  API_KEY: 2,
  BEARER_TOKEN: 3,
  IBAN: 4,
  PAYMENT_CARD: 5,
  SSN: 6,
  EMAIL: 7,
  PHONE: 8,
  GENERIC_SECRET: 9,
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
const NUM_L = String.raw`(?<![\w+])(?<![\w][.\-])`;
const NUM_R = String.raw`(?![\w])(?![.\-][\w])`;
// Phone numbers additionally never start right after another digit group: without this the
// tail of one number ("…555 0100 123-45-6789") reads as a trunk-prefixed national number.
const PHONE_L = NUM_L + String.raw`(?<![0-9][ \u00A0\u202F.\-])`;
// Same idea for opaque tokens (keys, JWTs): they must not be a slice of a longer token.
const TOK_L = String.raw`(?<![A-Za-z0-9_\-])`;
const TOK_R = String.raw`(?![A-Za-z0-9_\-])`;
// Space-like and punctuation separators that people put inside phone and card numbers.
const SP = String.raw`[ \u00A0\u202F]`;
const SEP = String.raw`[ \u00A0\u202F.\-]`;

function re(source: string, flags: string): RegExp {
  return new RegExp(source, flags);
}

// ---------------------------------------------------------------------------------------------
// Prefilter triggers.
//
// Most chat messages contain nothing any detector could match, yet running every pattern over
// them was most of the policy's cost (~25 regex passes per append). A trigger is a *necessary
// condition* of a detector: something that every text yielding a candidate of that detector
// (a match or a claim) contains, either because the pattern requires it (a literal prefix, a
// `[0-9]`, an `@`) or because the validator rejects every hit without it (a digit). So:
//
// - where no trigger matches, no detector can, and `findPii` answers [] after one pass of the
//   combined trigger regex (`mayContainPii`);
// - otherwise only the detectors whose trigger matched run. A detector whose trigger is
//   common (a digit) and whose scan is costly may add a `gate`, a second necessary condition
//   that is checked only in this case and is not part of `mayContainPii`. Masking between
//   passes only replaces characters with U+0000, which no trigger or gate contains, so what
//   is absent from the text is absent from every later view too.
//
// Skipping a detector is only sound if its trigger (and gate) is truly necessary: it may be
// wider than its detector (that costs a scan, nothing else), never narrower. Every detector
// states its trigger in `DETECTORS` (the field is required) and, next to its pattern, why the
// trigger is necessary. Triggers are flagless, case-sensitive regexes; where a detector is
// case-insensitive the trigger spells out both cases. Adding or widening a detector means
// re-checking that argument; test/unit/pii-prefilter.test.ts runs every detector, ungated,
// on texts its trigger does not match and expects nothing.
/** A detector's necessary condition; the regexes are `TRIGGERS`. */
export type PiiTrigger = 'DIGIT' | 'AT' | 'PEM' | 'JWT' | 'BEARER' | 'VENDOR_KEY';

/**
 * Runs a global regex over `text`, calling `onMatch` for each hit. `onMatch` returns the end
 * of the span it accepted (which may be shorter than the hit), or `false`. The scan resumes
 * at the accepted end, or one character after a rejected hit's start so that a greedy but
 * invalid candidate cannot hide a valid one that starts inside it. That resumption is only
 * linear because every pattern passed here is either bounded or start-anchored by a lookbehind.
 */
function scan(pattern: RegExp, text: string, onMatch: (m: RegExpExecArray) => number | false): void {
  pattern.lastIndex = 0;
  for (let m = pattern.exec(text); m !== null; m = pattern.exec(text)) {
    const end = onMatch(m);
    pattern.lastIndex = end === false ? m.index + 1 : Math.max(end, m.index + 1);
  }
}

function groupSpan(m: RegExpExecArray, group: number): [number, number] | undefined {
  return m.indices?.[group];
}

/** Records a candidate and returns its end, the shape `scan` callbacks answer with. */
function add(out: Candidate[], kind: PiiKind | null, start: number, end: number, rank: number): number {
  out.push({ kind, start, end, rank });
  return end;
}

// ---------------------------------------------------------------------------------------------
// PEM private keys.
//
// The terminated form's body is the unrolled loop `[^-]*(?:-(?!----)[^-]*)*`: it stops at the
// first "-----", so each BEGIN scans only up to the next dash run and the whole pass stays
// O(n) even with thousands of BEGIN markers and no END. The unterminated form catches keys
// that were cut off (a truncated key is still a key): header, optional PEM headers, then
// base64 lines. Chunks are forced maximal with a lookahead so the repetition is unambiguous.
// Trigger PEM: both forms start with the case-sensitive literal "-----BEGIN ".
const PEM = re(
  String.raw`-----BEGIN (?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?-----` +
    String.raw`(?:[^-]*(?:-(?!----)[^-]*)*-----END (?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?-----` +
    String.raw`|(?:[ \t\r\n]|\\[rn]|(?:Proc-Type|DEK-Info|Comment|Version|Hash):[^\r\n\\\x00]{0,200}|[A-Za-z0-9+/=]{16,}(?![A-Za-z0-9+/=]))*)`,
  'g',
);

function detectPem(text: string, out: Candidate[]): void {
  scan(PEM, text, (m) => {
    let end = m.index + m[0].length;
    // The unterminated form may swallow trailing whitespace or escaped newlines; leave them.
    while (end > m.index) {
      const c = text.charCodeAt(end - 1);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) end--;
      else if ((c === 0x6e || c === 0x72) && text.charCodeAt(end - 2) === 0x5c) end -= 2;
      else break;
    }
    return add(out, 'PRIVATE_KEY', m.index, end, RANK.PRIVATE_KEY);
  });
}

// ---------------------------------------------------------------------------------------------
// JWT / JWS / JWE compact serialisations. The header is base64url JSON, so it always starts
// with "eyJ" ('{"'). Three segments (JWS, empty signature allowed for alg "none") or five
// (JWE). A segment class excludes '.', so segment boundaries are unambiguous.
// Trigger JWT: the case-sensitive literal "eyJ".
const JWT = re(
  TOK_L +
    String.raw`eyJ[A-Za-z0-9_\-]{7,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-]*\.[A-Za-z0-9_\-]*)?` +
    TOK_R +
    String.raw`(?!\.[A-Za-z0-9_\-])`,
  'g',
);

function detectJwt(text: string, out: Candidate[]): void {
  scan(JWT, text, (m) => {
    return add(out, 'JWT', m.index, m.index + m[0].length, RANK.JWT);
  });
}

// ---------------------------------------------------------------------------------------------
// Vendor API keys. Each shape has a distinctive prefix, so false positives are rare; the
// OpenAI-style "sk-" prefix is generic enough that the body must also look random.
function hasDigitUpperLower(s: string): boolean {
  return /[0-9]/.test(s) && /[A-Z]/.test(s) && /[a-z]/.test(s);
}

interface KeyShape {
  /** For diagnostics (`traceDetectors`). */
  name: string;
  pattern: RegExp;
  valid?: (s: string) => boolean;
  /**
   * Prefilter: `{ literal }`, a regex source (flagless, case-sensitive) that every match of
   * `pattern` contains, joins the VENDOR_KEY trigger; `'DIGIT'` when `valid` rejects any hit
   * without a digit (the prefix alone is too common a string to be worth its own trigger).
   */
  trigger: { literal: string } | 'DIGIT';
}

// Each shape's trigger is its vendor prefix (a case-sensitive literal of the pattern), or a
// digit where the validator demands one.
const KEY_SHAPES: readonly KeyShape[] = [
  // AWS access key ids (long-term AKIA, temporary ASIA).
  {
    name: 'AWS',
    pattern: re(TOK_L + String.raw`(?:AKIA|ASIA)[A-Z0-9]{16}` + TOK_R, 'g'),
    trigger: { literal: 'AKIA|ASIA' },
  },
  // GitHub classic tokens and fine-grained PATs.
  {
    name: 'GitHub',
    pattern: re(TOK_L + String.raw`gh[pousr]_[A-Za-z0-9]{36,251}` + TOK_R, 'g'),
    trigger: { literal: 'gh[pousr]_' },
  },
  {
    name: 'GitHub PAT',
    pattern: re(TOK_L + String.raw`github_pat_[A-Za-z0-9_]{22,244}` + TOK_R, 'g'),
    trigger: { literal: 'github_pat_' },
  },
  // GitLab personal access tokens, npm tokens.
  {
    name: 'GitLab',
    pattern: re(TOK_L + String.raw`glpat-[A-Za-z0-9_\-]{20,64}` + TOK_R, 'g'),
    trigger: { literal: 'glpat-' },
  },
  { name: 'npm', pattern: re(TOK_L + String.raw`npm_[A-Za-z0-9]{36}` + TOK_R, 'g'), trigger: { literal: 'npm_' } },
  // Slack tokens carry numeric workspace/user ids, hence the digit requirement.
  {
    name: 'Slack',
    pattern: re(TOK_L + String.raw`xox[abeoprs]-[A-Za-z0-9\-]{10,250}` + TOK_R, 'g'),
    valid: (s) => /[0-9]/.test(s),
    trigger: 'DIGIT',
  },
  // Slack incoming webhooks: the URL itself is the credential.
  {
    name: 'Slack webhook',
    pattern: re(String.raw`https://hooks\.slack\.com/services/[A-Za-z0-9_/\-]{20,200}` + TOK_R, 'g'),
    trigger: { literal: String.raw`https://hooks\.slack\.com/` },
  },
  // Stripe secret and restricted keys (publishable pk_ keys are public by design).
  {
    name: 'Stripe',
    pattern: re(TOK_L + String.raw`(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,247}` + TOK_R, 'g'),
    trigger: { literal: '[sr]k_(?:live|test)_' },
  },
  // Google API keys.
  { name: 'Google', pattern: re(TOK_L + String.raw`AIza[A-Za-z0-9_\-]{35}` + TOK_R, 'g'), trigger: { literal: 'AIza' } },
  // SendGrid.
  {
    name: 'SendGrid',
    pattern: re(TOK_L + String.raw`SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}` + TOK_R, 'g'),
    trigger: { literal: String.raw`SG\.` },
  },
  // Hugging Face access tokens.
  {
    name: 'Hugging Face',
    pattern: re(TOK_L + String.raw`hf_[A-Za-z0-9]{30,40}` + TOK_R, 'g'),
    valid: hasDigitUpperLower,
    trigger: 'DIGIT',
  },
  // OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-...) and similar. "sk-" also opens
  // ordinary kebab-case words, so the body must mix digits and both letter cases.
  {
    name: 'sk-',
    pattern: re(TOK_L + String.raw`sk-[A-Za-z0-9_\-]{20,300}` + TOK_R, 'g'),
    valid: hasDigitUpperLower,
    trigger: 'DIGIT',
  },
];

function detectKeyShape(shape: KeyShape, text: string, out: Candidate[]): void {
  scan(shape.pattern, text, (m) => {
    if (shape.valid && !shape.valid(m[0])) return false;
    return add(out, 'API_KEY', m.index, m.index + m[0].length, RANK.API_KEY);
  });
}

// Generic `api_key = ...`-style assignments (env files, JSON, YAML, CLI flags). Only the value
// is redacted, so the reader still sees which setting was sent. The key must *end* with one of
// the secret words ("GITHUB_TOKEN", "db_password"; not "token_url"), and the value must
// contain a letter and a digit, which rules out code such as `token: string`. The value is
// printable ASCII without quotes or brackets: that ends it at the closing quote, at the `]` of
// an earlier redaction marker, or at a masked span (see `findPii`).
// Trigger DIGIT: the validator rejects a value without a digit. Digits are common, so the
// detector is also gated on SECRET_WORD: every alternative of the key contains "key",
// "secret", "token", "passw" or "pwd". Both regexes are case-insensitive without `u`, so they
// fold letters alike (ASCII only, see BEARER).
const SECRET_WORD = /key|secret|token|passw|pwd/i;
const GENERIC_SECRET = re(
  String.raw`(?<![A-Za-z0-9_.\-])[A-Za-z0-9_.\-]{0,40}?` +
    String.raw`(?:api[_.\-]?key|secret[_.\-]?key|access[_.\-]?key|client[_.\-]?secret|` +
    String.raw`(?:access|auth|refresh|api|bearer)[_.\-]?token|private[_.\-]?key|password|passwd|pwd|secret|token)` +
    String.raw`["']?[ \t]{0,3}[:=][ \t]{0,3}["']?([!#$%&*+\-./0-9:=?@A-Z^_a-z|~]{8,256})`,
  'gid',
);

function detectGenericSecrets(text: string, out: Candidate[]): void {
  scan(GENERIC_SECRET, text, (m) => {
    const span = groupSpan(m, 1);
    if (!span) return false;
    const start = span[0];
    let end = span[1];
    while (end > start && text[end - 1] === '.') end--;
    const value = text.slice(start, end);
    if (value.length < 8 || !/[A-Za-z]/.test(value) || !/[0-9]/.test(value)) return false;
    return add(out, 'API_KEY', start, end, RANK.GENERIC_SECRET);
  });
}

// ---------------------------------------------------------------------------------------------
// Bearer tokens (RFC 6750 b64token). Only the token is redacted: the word "Bearer" is not
// secret and keeping it tells the reader what was removed. Prose like "the bearer of this
// letter" is excluded by requiring a token-like value: at least 12 characters with a digit, or
// at least 20 with mixed case.
// Trigger BEARER: "bearer" in any ASCII case (the token may be letters only, so no digit). The
// pattern is case-insensitive without the `u` flag, and there Canonicalize (ECMA-262 §22.2.2.7.3)
// never maps a non-ASCII character onto an ASCII one: "ſ", "ı" or the Kelvin sign do not
// match, so the trigger's ASCII classes cover exactly what the pattern accepts.
const BEARER = re(String.raw`(?<![A-Za-z0-9_\-])bearer[ \t]{1,4}([A-Za-z0-9\-._~+/]{8,4096}=*)`, 'gid');

function detectBearer(text: string, out: Candidate[]): void {
  scan(BEARER, text, (m) => {
    const span = groupSpan(m, 1);
    if (!span) return false;
    const start = span[0];
    let end = span[1];
    // Sentence punctuation after the token is not part of it.
    while (end > start && text[end - 1] === '.') end--;
    const token = text.slice(start, end);
    const looksRandom =
      (token.length >= 12 && /[0-9]/.test(token) && /[A-Za-z]/.test(token)) ||
      (token.length >= 20 && /[A-Z]/.test(token) && /[a-z]/.test(token));
    if (!looksRandom) return false;
    return add(out, 'BEARER_TOKEN', start, end, RANK.BEARER_TOKEN);
  });
}

// ---------------------------------------------------------------------------------------------
// IBAN. The regex only finds a candidate (country letters, check digits, 11–30 more
// alphanumerics with optional single spaces); the validator cuts it to the country's exact
// length, checks the grouping and the boundary, and verifies ISO 7064 mod-97.
const IBAN_LENGTH: Readonly<Record<string, number>> = {
  AD: 24,
  AE: 23,
  AL: 28,
  AT: 20,
  AZ: 28,
  BA: 20,
  BE: 16,
  BG: 22,
  BH: 22,
  BI: 27,
  BR: 29,
  BY: 28,
  CH: 21,
  CR: 22,
  CY: 28,
  CZ: 24,
  DE: 22,
  DJ: 27,
  DK: 18,
  DO: 28,
  EE: 20,
  EG: 29,
  ES: 24,
  FI: 18,
  FK: 18,
  FO: 18,
  FR: 27,
  GB: 22,
  GE: 22,
  GI: 23,
  GL: 18,
  GR: 27,
  GT: 28,
  HN: 28,
  HR: 21,
  HU: 28,
  IE: 22,
  IL: 23,
  IQ: 23,
  IS: 26,
  IT: 27,
  JO: 30,
  KW: 30,
  KZ: 20,
  LB: 28,
  LC: 32,
  LI: 21,
  LT: 20,
  LU: 20,
  LV: 21,
  LY: 25,
  MC: 27,
  MD: 24,
  ME: 22,
  MK: 19,
  MN: 20,
  MR: 27,
  MT: 31,
  MU: 30,
  NI: 28,
  NL: 18,
  NO: 15,
  OM: 23,
  PK: 24,
  PL: 28,
  PS: 29,
  PT: 25,
  QA: 29,
  RO: 24,
  RS: 22,
  RU: 33,
  SA: 24,
  SC: 31,
  SD: 18,
  SE: 24,
  SI: 19,
  SK: 24,
  SM: 27,
  SO: 23,
  ST: 25,
  SV: 28,
  TL: 23,
  TN: 24,
  TR: 26,
  UA: 29,
  VA: 22,
  VG: 24,
  XK: 20,
  YE: 30,
};

// Trigger DIGIT: the check digits are `[0-9]{2}`.
const IBAN = re(String.raw`(?<![A-Za-z0-9_])(?<![A-Za-z0-9_][.\-])[A-Za-z]{2}[0-9]{2}(?:[ \u00A0]?[A-Za-z0-9]){11,30}`, 'g');

/** ISO 7064 MOD 97-10 over an upper-case IBAN without spaces. */
export function ibanChecksumOk(iban: string): boolean {
  const rearranged = iban.slice(4) + iban.slice(0, 4);
  let rem = 0;
  for (let i = 0; i < rearranged.length; i++) {
    const c = rearranged.charCodeAt(i);
    if (c >= 0x30 && c <= 0x39) rem = (rem * 10 + (c - 0x30)) % 97;
    else if (c >= 0x41 && c <= 0x5a) rem = (rem * 100 + (c - 0x41 + 10)) % 97;
    else return false;
  }
  return rem === 1;
}

function detectIban(text: string, out: Candidate[]): void {
  scan(IBAN, text, (m) => {
    const cand = m[0];
    const country = cand.slice(0, 2).toUpperCase();
    const want = IBAN_LENGTH[country];
    if (want === undefined) return false;
    // Cut the candidate to exactly `want` alphanumerics. Spaces, if any, must split it into
    // groups of four as printed on statements ("DE89 3704 0044 0532 0130 00").
    let compact = '';
    let i = 0;
    let spaced = false;
    let groupLen = 0;
    for (; i < cand.length && compact.length < want; i++) {
      const ch = cand.charAt(i);
      if (ch === ' ' || ch === '\u00A0') {
        if (groupLen !== 4) return false;
        spaced = true;
        groupLen = 0;
        continue;
      }
      compact += ch;
      groupLen++;
    }
    if (compact.length !== want || (spaced && groupLen > 4)) return false;
    const end = m.index + i;
    const next = text.charAt(end);
    if (/[A-Za-z0-9_]/.test(next)) return false;
    if (/[.-]/.test(next) && /[A-Za-z0-9_]/.test(text.charAt(end + 1))) return false;
    // Mixed case ("De89...") is not how anyone writes an IBAN; requiring one case keeps
    // random identifiers out.
    const letters = compact.replace(/[0-9]/g, '');
    if (letters !== letters.toUpperCase() && letters !== letters.toLowerCase()) return false;
    // Check digits are 02..98 by construction (98 - n mod 97); 00, 01 and 99 can satisfy
    // mod-97 only by accident.
    const check = Number(compact.slice(2, 4));
    const ok = check >= 2 && check <= 98 && ibanChecksumOk(compact.toUpperCase());
    return add(out, ok ? 'IBAN' : null, m.index, end, RANK.IBAN);
  });
}

// ---------------------------------------------------------------------------------------------
// Payment cards. "Card-shaped" means 13–19 contiguous digits, or the groupings card issuers
// print: 4-4-4-4(-1..3), 4-4-4-1..3, 4-6-5 and 4-6-4, with one consistent separator. A card-
// shaped run is a card only if its prefix belongs to a card network (IIN) with that length and
// it passes Luhn; otherwise it is claimed as nothing. Luhn alone accepts one random digit
// string in ten, and millisecond timestamps are 13 digits, hence the IIN check.
// Trigger DIGIT: every alternative is made of `[0-9]` runs.
const CARD = re(
  NUM_L +
    String.raw`(?:[0-9]{13,19}` +
    String.raw`|[0-9]{4}([ \u00A0\-])[0-9]{4}\1[0-9]{4}\1(?:[0-9]{4}(?:\1[0-9]{1,3})?|[0-9]{1,3})` +
    String.raw`|[0-9]{4}([ \u00A0\-])[0-9]{6}\2[0-9]{4,5})` +
    NUM_R,
  'g',
);

/** Luhn (mod 10) check over a string of ASCII digits. */
export function luhnOk(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 0x30;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

function cardPrefixOk(d: string): boolean {
  const len = d.length;
  const p2 = Number(d.slice(0, 2));
  const p3 = Number(d.slice(0, 3));
  const p4 = Number(d.slice(0, 4));
  if (d[0] === '4') return len === 13 || len === 16 || len === 19; // Visa
  if (p2 >= 51 && p2 <= 55) return len === 16; // Mastercard
  if (p4 >= 2221 && p4 <= 2720) return len === 16; // Mastercard 2-series
  if (p4 >= 2200 && p4 <= 2204) return len >= 16; // Mir
  if (p2 === 34 || p2 === 37) return len === 15; // American Express
  if ((p3 >= 300 && p3 <= 305) || p2 === 36 || p2 === 38 || p2 === 39) return len >= 14; // Diners
  if (p4 >= 3528 && p4 <= 3589) return len >= 16; // JCB
  if (d[0] === '6') return true; // Discover, UnionPay, Maestro, RuPay
  if (p2 === 50 || (p2 >= 56 && p2 <= 58)) return true; // Maestro
  return false;
}

function detectCards(text: string, out: Candidate[]): void {
  scan(CARD, text, (m) => {
    const digits = m[0].replace(/[^0-9]/g, '');
    const ok = digits.length >= 13 && digits.length <= 19 && cardPrefixOk(digits) && luhnOk(digits);
    return add(out, ok ? 'PAYMENT_CARD' : null, m.index, m.index + m[0].length, RANK.PAYMENT_CARD);
  });
}

// ---------------------------------------------------------------------------------------------
// US social security numbers: AAA-GG-SSSS, and the undashed/spaced form only after an
// explicit "SSN" label. Shapes with an area/group/serial the SSA never issues are claimed as
// nothing (so "000-12-3456" is not then read as a phone number).
// Trigger DIGIT: both forms capture `[0-9]{3}` (case-insensitivity does not touch digits).
const SSN = re(NUM_L + String.raw`([0-9]{3})-([0-9]{2})-([0-9]{4})` + NUM_R, 'g');
const SSN_LABELLED = re(
  String.raw`\b(?:ssn|social security(?: number| no\.?)?)[ \t]{0,3}(?:#|no\.?|number)?[ \t]{0,3}[:=#]?[ \t]{0,3}` +
    String.raw`(?<![0-9])([0-9]{3})[ \u00A0]?([0-9]{2})[ \u00A0]?([0-9]{4})` +
    NUM_R,
  'gid',
);

function ssnValid(area: string, group: string, serial: string): boolean {
  if (area === '000' || area === '666' || area[0] === '9') return false;
  return group !== '00' && serial !== '0000';
}

function detectSsn(text: string, out: Candidate[]): void {
  scan(SSN, text, (m) => {
    const ok = ssnValid(m[1] ?? '', m[2] ?? '', m[3] ?? '');
    return add(out, ok ? 'SSN' : null, m.index, m.index + m[0].length, RANK.SSN);
  });
  scan(SSN_LABELLED, text, (m) => {
    const a = groupSpan(m, 1);
    const c = groupSpan(m, 3);
    if (!a || !c) return false;
    const ok = ssnValid(m[1] ?? '', m[2] ?? '', m[3] ?? '');
    return add(out, ok ? 'SSN' : null, a[0], c[1], RANK.SSN);
  });
}

// ---------------------------------------------------------------------------------------------
// E-mail addresses: RFC 5321 length limits (local part ≤ 64, labels ≤ 63, ≤ 10 labels), a
// letters-only TLD, Unicode letters allowed (internationalised addresses). The lookbehind
// means a run of local-part characters is entered once, not at every character.
// Trigger AT: the literal "@" (U+0040; the pattern is not case-insensitive, so no fold of the
// `u` flag brings in "＠" or "﹫").
const EMAIL = re(
  String.raw`(?<![\p{L}\p{N}\p{M}_%+\-])[\p{L}\p{N}\p{M}_%+\-][\p{L}\p{N}\p{M}._%+\-]{0,63}@` +
    String.raw`(?:[\p{L}\p{N}](?:[\p{L}\p{N}\p{M}\-]{0,61}[\p{L}\p{N}\p{M}])?\.){1,10}\p{L}[\p{L}\p{M}]{1,62}` +
    String.raw`(?![\p{L}\p{N}\p{M}_\-])`,
  'gu',
);

function detectEmail(text: string, out: Candidate[]): void {
  scan(EMAIL, text, (m) => {
    const at = m[0].lastIndexOf('@');
    // "icon@2x.png" and "logo@1.5x.jpg" are asset names, not mailboxes.
    if (/^[0-9]+(?:\.[0-9]+)?x\./i.test(m[0].slice(at + 1))) return false;
    // "git@github.com:org/repo.git" is a git remote's service account, not a person.
    const end = m.index + m[0].length;
    if (m[0].slice(0, at) === 'git' && text.charAt(end) === ':') return false;
    return add(out, 'EMAIL', m.index, end, RANK.EMAIL);
  });
}

// ---------------------------------------------------------------------------------------------
// Phone numbers. Bare digit runs are far more often ids, counts and timestamps than phone
// numbers, so a run is only a phone when it carries a phone-specific marker:
//   - an international "+" prefix (E.164, formatted or not);
//   - the North American 3-3-4 layout with separators and valid area/exchange first digits;
//   - a national trunk prefix ("0" or international "00") followed by separated groups;
//   - an explicit label such as "tel:", "phone", "call", "fax" right before it.
// Formats are validated in code: digit count, group sizes, dates, repeated digits.
// Trigger DIGIT: every form requires an ASCII `[0-9]` (the labels alone match nothing).
const PHONE_INTL = re(String.raw`(?<![\w+])\+[1-9](?:[0-9]|${SEP}(?=[0-9(])|\([0-9]{1,4}\)){5,28}` + NUM_R, 'g');
const PHONE_NANP = re(
  PHONE_L + String.raw`(?:1${SEP})?(?:\([2-9][0-9]{2}\)${SP}?|[2-9][0-9]{2}${SEP})[2-9][0-9]{2}${SEP}[0-9]{4}` + NUM_R,
  'g',
);
const PHONE_TRUNK = re(
  PHONE_L +
    String.raw`(?:\(0[1-9][0-9]{0,3}\)${SP}?|(?:00[1-9][0-9]{0,2}|0[1-9][0-9]{0,3})${SEP})` +
    String.raw`[0-9]{2,8}(?:${SEP}[0-9]{2,8}){0,4}` +
    NUM_R,
  'g',
);
const PHONE_LABELLED = re(
  String.raw`(?:\b(?:telephone|phone|tel|mobile|cell|fax|call|whatsapp|sms|telefon|telefono|tel[eé]fono|t[eé]l[eé]phone|t[eé]l|handy|m[oó]vil|celular)\b` +
    // CJK labels are written directly against the digits, so no \b (which is ASCII-only).
    String.raw`|电话|手机|電話|携帯|전화)` +
    String.raw`(?:[ \t]{1,3}(?:number|no\.?|nr\.?|num|#|(?:(?:me|us)[ \t]{1,3})?(?:at|on)))?[ \t]{0,3}[:=#.]{0,2}[ \t]{0,3}` +
    String.raw`(?<![\w+])(\+?\(?[0-9][0-9 \u00A0\u202F().\-]{5,24}[0-9])` +
    NUM_R,
  'gid',
);

const DATE_LIKE = /^(?:[0-9]{4}[ .\-/][0-9]{1,2}[ .\-/][0-9]{1,2}|[0-9]{1,2}[ .\-/][0-9]{1,2}[ .\-/](?:[0-9]{2}|[0-9]{4}))$/;

/**
 * Checks the digit groups of a phone candidate. `minDigits` depends on how strong the
 * surrounding evidence is (a label or "+" allows shorter numbers than a bare trunk prefix).
 */
function phoneOk(s: string, minDigits: number): boolean {
  const groups = s.match(/[0-9]+/g);
  if (!groups) return false;
  const digits = groups.join('');
  if (digits.length < minDigits || digits.length > 15) return false;
  if (DATE_LIKE.test(s)) return false;
  // Seven identical digits in a row ("+10000000") are round numbers, not subscribers.
  if (/([0-9])\1{6}/.test(digits)) return false;
  // Separators come one at a time, except around a parenthesised area code.
  if (/[ \u00A0\u202F.-]{2,}/.test(s.replace(/\) /g, ')').replace(/ \(/g, '('))) return false;
  // Groups after the first are at least two digits; one single-digit group is allowed for
  // the "(0)" trunk or French-style "+33 6 12 ..."...
  let singles = 0;
  for (let i = 1; i < groups.length; i++) if ((groups[i] as string).length === 1) singles++;
  if (singles > 1) return false;
  // ...but never the last group: "+1 415 555 0100 2 times" ends at 0100.
  if (groups.length > 1 && (groups[groups.length - 1] as string).length === 1) return false;
  // "+3.14159" is a decimal, not a number with dotted groups.
  if (s.includes('.') && groups.length < 3) return false;
  const opens = s.split('(').length - 1;
  const closes = s.split(')').length - 1;
  if (opens !== closes || opens > 1) return false;
  return true;
}

/** Drops trailing space-separated groups until the candidate validates, for "…0100 2 times". */
function trimPhone(text: string, start: number, end: number, minDigits: number): number | null {
  for (let attempt = 0; attempt < 4; attempt++) {
    if (phoneOk(text.slice(start, end), minDigits)) return end;
    const s = text.slice(start, end);
    const cut = Math.max(s.lastIndexOf(' '), s.lastIndexOf('\u00A0'), s.lastIndexOf('\u202F'));
    if (cut <= 0) return null;
    end = start + cut;
    while (end > start && !/[0-9)]/.test(text.charAt(end - 1))) end--;
    if (text.charAt(end - 1) === ')') return null;
  }
  return null;
}

function detectPhones(text: string, out: Candidate[]): void {
  scan(PHONE_INTL, text, (m) => {
    const s = m[0];
    const contiguous = /^\+[0-9]+$/.test(s);
    const end = trimPhone(text, m.index, m.index + s.length, contiguous ? 10 : 8);
    return end === null ? false : add(out, 'PHONE', m.index, end, RANK.PHONE);
  });
  scan(PHONE_NANP, text, (m) => (phoneOk(m[0], 10) ? add(out, 'PHONE', m.index, m.index + m[0].length, RANK.PHONE) : false));
  scan(PHONE_TRUNK, text, (m) => (phoneOk(m[0], 9) ? add(out, 'PHONE', m.index, m.index + m[0].length, RANK.PHONE) : false));
  scan(PHONE_LABELLED, text, (m) => {
    const span = groupSpan(m, 1);
    if (!span) return false;
    const end = trimPhone(text, span[0], span[1], 7);
    return end === null ? false : add(out, 'PHONE', span[0], end, RANK.PHONE);
  });
}

// ---------------------------------------------------------------------------------------------

/**
 * Overlap resolution for one detection pass, appending to `result`. Longer spans win
 * first (they cover more, so a loser leaves the least text unredacted), then the more
 * specific kind, then the earlier start. Claims (`kind: null`) take part like matches and are
 * not reported. Returns how many matches were added.
 */
function resolvePass(candidates: Candidate[], text: string, result: PiiMatch[]): number {
  if (candidates.length === 0) return 0;
  // Only real matches from earlier passes block; claims are rediscovered in each pass, just
  // as a fresh scan of the redacted text would rediscover them.
  const taken = new Uint8Array(text.length);
  for (const m of result) taken.fill(1, m.start, m.end);
  candidates.sort((a, b) => b.end - b.start - (a.end - a.start) || a.rank - b.rank || a.start - b.start);
  let added = 0;
  for (const c of candidates) {
    if (c.end <= c.start) continue;
    let free = true;
    for (let i = c.start; i < c.end; i++) {
      if (taken[i] !== 0) {
        free = false;
        break;
      }
    }
    if (!free) continue;
    taken.fill(1, c.start, c.end);
    if (c.kind !== null) {
      result.push({ kind: c.kind, start: c.start, end: c.end });
      added++;
    }
  }
  return added;
}

// ---------------------------------------------------------------------------------------------
// The detectors in the order their candidates are collected. A new detector is added here,
// and the type makes it name its trigger.

interface Detector {
  name: string;
  trigger: PiiTrigger;
  /**
   * A second necessary condition, tested only where the trigger occurs: for a costly detector
   * whose trigger (a digit) is too common to skip it often. Not part of `mayContainPii`.
   */
  gate?: RegExp;
  detect: (text: string, out: Candidate[]) => void;
}

const DETECTORS: readonly Detector[] = [
  { name: 'PEM', trigger: 'PEM', detect: detectPem },
  { name: 'JWT', trigger: 'JWT', detect: detectJwt },
  ...KEY_SHAPES.map((shape): Detector => ({
    name: `API_KEY ${shape.name}`,
    trigger: shape.trigger === 'DIGIT' ? 'DIGIT' : 'VENDOR_KEY',
    detect: (text, out) => {
      detectKeyShape(shape, text, out);
    },
  })),
  { name: 'GENERIC_SECRET', trigger: 'DIGIT', gate: SECRET_WORD, detect: detectGenericSecrets },
  { name: 'BEARER', trigger: 'BEARER', detect: detectBearer },
  { name: 'IBAN', trigger: 'DIGIT', detect: detectIban },
  { name: 'CARD', trigger: 'DIGIT', detect: detectCards },
  { name: 'SSN', trigger: 'DIGIT', detect: detectSsn },
  { name: 'EMAIL', trigger: 'AT', detect: detectEmail },
  { name: 'PHONE', trigger: 'DIGIT', detect: detectPhones },
];

// Flagless on purpose (see "Prefilter triggers"), so that they combine into one alternation.
const TRIGGERS: Readonly<Record<PiiTrigger, RegExp>> = {
  DIGIT: /[0-9]/,
  AT: /@/,
  PEM: /-----BEGIN /,
  JWT: /eyJ/,
  BEARER: /[Bb][Ee][Aa][Rr][Ee][Rr]/,
  VENDOR_KEY: new RegExp(KEY_SHAPES.flatMap((shape) => (shape.trigger === 'DIGIT' ? [] : [`(?:${shape.trigger.literal})`])).join('|')),
};
const TRIGGER_NAMES = Object.keys(TRIGGERS) as PiiTrigger[];
const ANY_TRIGGER = new RegExp(TRIGGER_NAMES.map((t) => `(?:${TRIGGERS[t].source})`).join('|'));
const TRIGGER_BIT = Object.fromEntries(TRIGGER_NAMES.map((t, i) => [t, 1 << i])) as Record<PiiTrigger, number>;

/** Bit set of the triggers that occur in `text`. */
function triggersIn(text: string): number {
  let bits = 0;
  for (const t of TRIGGER_NAMES) if (TRIGGERS[t].test(text)) bits |= TRIGGER_BIT[t];
  return bits;
}

/** Whether `d` can produce candidates in `text`, given the triggers that occur there. */
function mayRun(d: Detector, text: string, present: number): boolean {
  return (present & TRIGGER_BIT[d.trigger]) !== 0 && (d.gate === undefined || d.gate.test(text));
}

/**
 * The prefilter: `false` means no detector can match anything in `text`, so `findPii(text)`
 * is empty; `true` means "maybe". One scan of one regex, a few hundred ns for a chat message.
 */
export function mayContainPii(text: string): boolean {
  return ANY_TRIGGER.test(text);
}

/** Runs the detectors flagged in `run` (one flag per entry of DETECTORS), or all when null. */
function collect(text: string, run: readonly boolean[] | null): Candidate[] {
  const candidates: Candidate[] = [];
  for (let i = 0; i < DETECTORS.length; i++) {
    if (run === null || run[i] === true) (DETECTORS[i] as Detector).detect(text, candidates);
  }
  return candidates;
}

// Each pass is linear; in practice the second pass finds nothing new. The cap only bounds
// contrived chains where every redaction exposes a new neighbour.
const MAX_PASSES = 4;

/**
 * Finds e-mail addresses, phone numbers, payment cards, US SSNs, IBANs, PEM private keys,
 * API keys, bearer tokens and JWTs in `text`.
 *
 * Returns non-overlapping matches sorted by `start`, with UTF-16 offsets (`end` exclusive).
 * When detectors overlap, the longer span wins, and on equal length the more specific kind
 * (a PEM block beats anything inside it; a JWT beats the bearer token that carries it).
 *
 * A match changes the context of its neighbours: a candidate that lost a partial overlap
 * still has an unredacted remainder, and an address glued to a key ("a@b.io-----BEGIN…")
 * only stands alone once the key is gone. So after any pass that adds matches, the text is
 * scanned again with those matches masked out (same length, so offsets hold), which is what
 * redacting the redacted output would see. That keeps redaction idempotent. Runs in time
 * linear in `text.length`.
 *
 * Text without any trigger returns at once, and only the detectors whose trigger occurs in
 * `text` run; the result is always that of `findPiiFull`.
 */
export function findPii(text: string): PiiMatch[] {
  if (!mayContainPii(text)) return [];
  // Masking only replaces characters with U+0000, which neither triggers nor gates contain, so
  // what is absent from `text` is absent from every later pass's view too.
  const present = triggersIn(text);
  return findWith(
    text,
    DETECTORS.map((d) => mayRun(d, text, present)),
  );
}

/**
 * `findPii` without the prefilter: every detector runs on every pass. Same result, slower;
 * kept for the equivalence tests and the benchmark (bench/pii.mjs).
 */
export function findPiiFull(text: string): PiiMatch[] {
  return findWith(text, null);
}

function findWith(text: string, run: readonly boolean[] | null): PiiMatch[] {
  if (text.length === 0) return [];
  const result: PiiMatch[] = [];
  let view = text;
  for (let pass = 0; pass < MAX_PASSES; pass++) {
    if (resolvePass(collect(view, run), text, result) === 0) break;
    view = mask(text, result);
  }
  result.sort((a, b) => a.start - b.start);
  return result;
}

/** One detector's verdict on a text, from `traceDetectors`. */
export interface DetectorTrace {
  name: string;
  trigger: PiiTrigger;
  /** Whether the trigger (and the gate, if the detector has one) occurs in the text. */
  triggered: boolean;
  /** Matches and claims the detector produced, ungated, in a single pass. */
  candidates: number;
}

/**
 * For the prefilter's tests: runs every detector ungated on `text` (one pass, no masking)
 * and reports whether its trigger occurs and what it found. A detector with candidates on a
 * text where its trigger is absent would be skipped wrongly by `findPii`.
 */
export function traceDetectors(text: string): DetectorTrace[] {
  return DETECTORS.map((d) => {
    const out: Candidate[] = [];
    d.detect(text, out);
    return { name: d.name, trigger: d.trigger, triggered: mayRun(d, text, triggersIn(text)), candidates: out.length };
  });
}

/**
 * Replaces matched code units with U+0000, which no pattern accepts inside a token and every
 * boundary treats as a separator, as it would the `[` / `]` of a redaction marker. Claims are
 * left in place because redaction leaves them in place.
 */
function mask(text: string, matches: readonly PiiMatch[]): string {
  const sorted = [...matches].sort((a, b) => a.start - b.start);
  const parts: string[] = [];
  let pos = 0;
  for (const m of sorted) {
    parts.push(text.slice(pos, m.start), '\u0000'.repeat(m.end - m.start));
    pos = m.end;
  }
  parts.push(text.slice(pos));
  return parts.join('');
}
