// Secrets: PEM private keys, JWTs, vendor API keys, generic `secret = value` assignments and
// bearer tokens.
import { RANK, TOK_L, TOK_R, re, scan, groupSpan, add, type Candidate } from './common.js';

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

export function detectPem(text: string, out: Candidate[]): void {
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

export function detectJwt(text: string, out: Candidate[]): void {
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

/** A run of 16+ ASCII letters and digits that holds both: what random key material looks like, and words do not. */
function hasRandomRun(s: string): boolean {
  return (s.match(/[A-Za-z0-9]{16,}/g) ?? []).some((run) => /[0-9]/.test(run) && /[A-Za-z]/.test(run));
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
export const KEY_SHAPES: readonly KeyShape[] = [
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
  // ordinary kebab-case words, so the body must look random: mix digits and both letter cases,
  // or hold a run of 16 or more letters and digits with both (`sk-ant-api03-` + lowercase hex).
  {
    name: 'sk-',
    pattern: re(TOK_L + String.raw`sk-[A-Za-z0-9_\-]{20,300}` + TOK_R, 'g'),
    valid: (s) => hasDigitUpperLower(s) || hasRandomRun(s),
    trigger: 'DIGIT',
  },
];

export function detectKeyShape(shape: KeyShape, text: string, out: Candidate[]): void {
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
export const SECRET_WORD = /key|secret|token|passw|pwd/i;
const GENERIC_SECRET = re(
  String.raw`(?<![A-Za-z0-9_.\-])[A-Za-z0-9_.\-]{0,40}?` +
    String.raw`(?:api[_.\-]?key|secret[_.\-]?key|access[_.\-]?key|client[_.\-]?secret|` +
    String.raw`(?:access|auth|refresh|api|bearer)[_.\-]?token|private[_.\-]?key|password|passwd|pwd|secret|token)` +
    String.raw`["']?[ \t]{0,3}[:=][ \t]{0,3}["']?([!#$%&*+\-./0-9:=?@A-Z^_a-z|~]{8,256})`,
  'gid',
);

export function detectGenericSecrets(text: string, out: Candidate[]): void {
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

export function detectBearer(text: string, out: Candidate[]): void {
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
