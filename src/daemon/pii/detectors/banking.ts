// Banking identifiers: IBANs (ISO 13616, mod-97) and payment cards (IIN ranges, Luhn).
import { RANK, NUM_L, NUM_R, re, scan, add, type Candidate } from './common.js';

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

export function detectIban(text: string, out: Candidate[]): void {
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

export function detectCards(text: string, out: Candidate[]): void {
  scan(CARD, text, (m) => {
    const digits = m[0].replace(/[^0-9]/g, '');
    const ok = digits.length >= 13 && digits.length <= 19 && cardPrefixOk(digits) && luhnOk(digits);
    return add(out, ok ? 'PAYMENT_CARD' : null, m.index, m.index + m[0].length, RANK.PAYMENT_CARD);
  });
}
