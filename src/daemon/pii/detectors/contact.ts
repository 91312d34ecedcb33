// Contact details: e-mail addresses and phone numbers.
import { RANK, NUM_R, PHONE_L, SP, SEP, re, scan, groupSpan, add, type Candidate } from './common.js';

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

export function detectEmail(text: string, out: Candidate[]): void {
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

export function detectPhones(text: string, out: Candidate[]): void {
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
