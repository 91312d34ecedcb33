// The PII prefilter (src/daemon/pii/pii-detectors.ts, "Prefilter triggers"): `findPii` skips every
// detector whose trigger does not occur in the text, and returns [] at once when none does.
// That is only correct if each trigger is a necessary condition of its detector. These tests
// try to break that in the direction that would leak data: a detector that can match text in
// which its trigger is absent.
//
// - per detector, a minimal positive example (letters-only where the shape allows, so that the
//   non-digit triggers carry the weight), and a check that the table covers every detector;
// - property 1: on arbitrary text (Unicode, lone surrogates, controls, and near misses built
//   from the detectors' alphabets with every trigger stripped), no trigger ⇒ no candidate,
//   per detector and for the whole multi-pass `findPiiFull`;
// - property 2: real values of every shape embedded in arbitrary text always pass the
//   prefilter, and `findPii` agrees with `findPiiFull` on them;
// - property 3: `applyPiiPolicy` gives the same outcome with and without the prefilter.
//
// PII_PREFILTER_RUNS scales the run counts (1 = the defaults below); FC_SEED replays a seed.

import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { findPii, findPiiFull, ibanChecksumOk, luhnOk, mayContainPii, traceDetectors } from '../../src/daemon/pii/pii-detectors.js';
import type { PiiKind } from '../../src/daemon/pii/pii-detectors.js';
import { applyPiiPolicy } from '../../src/daemon/pii/pii-policy.js';

const SCALE = Number(process.env.PII_PREFILTER_RUNS ?? '1');
const SEED = process.env.FC_SEED !== undefined ? Number(process.env.FC_SEED) : undefined;
function runs(n: number): fc.Parameters<unknown> {
  return { numRuns: Math.max(1, Math.round(n * SCALE)), ...(SEED !== undefined ? { seed: SEED } : {}) };
}
const TIMEOUT = 300_000 * Math.max(1, SCALE);

/** Detectors that produced candidates although their trigger is absent: each one is a leak. */
function untriggeredHits(text: string): string[] {
  return traceDetectors(text)
    .filter((d) => !d.triggered && d.candidates > 0)
    .map((d) => `${d.name} (trigger ${d.trigger})`);
}

// ---------------------------------------------------------------------------------------------
// Minimal positive examples, one per detector (names as `traceDetectors` reports them).

const MINIMAL: ReadonlyArray<[detector: string, text: string, kind: PiiKind]> = [
  ['PEM', '-----BEGIN PRIVATE KEY-----', 'PRIVATE_KEY'],
  ['JWT', 'eyJhbGciOi.eyJz.', 'JWT'],
  ['API_KEY AWS', 'AKIAABCDEFGHIJKLMNOP', 'API_KEY'],
  ['API_KEY GitHub', 'ghr_' + 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJ', 'API_KEY'],
  ['API_KEY GitHub PAT', 'github_pat_' + 'abcdefghijk_ABCDEFGHIJ', 'API_KEY'],
  ['API_KEY GitLab', 'glpat-' + 'abcdefghij-ABCDEFGHI', 'API_KEY'],
  ['API_KEY npm', 'npm_' + 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJ', 'API_KEY'],
  ['API_KEY Slack', 'xoxb-1abcdefghi', 'API_KEY'],
  ['API_KEY Slack webhook', 'https://hooks.slack.com/services/TABCDEFGH/BABCDEFGH/x', 'API_KEY'],
  ['API_KEY Stripe', 'rk_test_' + 'abcdefghABCDEFGH', 'API_KEY'],
  ['API_KEY Google', 'AIza' + 'abcdefghijklmnopqrstuvwxyzABCDEFGHI', 'API_KEY'],
  ['API_KEY SendGrid', 'SG.' + 'a'.repeat(22) + '.' + 'B'.repeat(43), 'API_KEY'],
  ['API_KEY Hugging Face', 'hf_' + 'aB3'.repeat(10), 'API_KEY'],
  ['API_KEY sk-', 'sk-' + 'aB3'.repeat(7), 'API_KEY'],
  ['GENERIC_SECRET', 'pwd=abcdefg1', 'API_KEY'],
  ['BEARER', 'bEaReR abcdefghijKLMNOPQRST', 'BEARER_TOKEN'],
  ['IBAN', 'NO9386011117947', 'IBAN'],
  ['CARD', '4222222222222', 'PAYMENT_CARD'],
  ['SSN', '123-45-6789', 'SSN'],
  ['EMAIL', 'a@b.io', 'EMAIL'],
  ['PHONE', 'tel: 5550100', 'PHONE'],
  ['IPV4', '10.0.0.1', 'IP_ADDRESS'],
  ['IPV6', 'fe::abc', 'IP_ADDRESS'], // letters only: only "::" can trigger it
];

describe('prefilter: one minimal positive example per detector', () => {
  it('the examples cover every detector', () => {
    const names = traceDetectors('').map((d) => d.name);
    expect(MINIMAL.map(([name]) => name).sort()).toEqual([...names].sort());
  });

  it.each(MINIMAL)('%s: %s', (detector, text, kind) => {
    const trace = traceDetectors(text).find((d) => d.name === detector);
    expect(trace?.candidates).toBeGreaterThan(0);
    expect(trace?.triggered).toBe(true);
    expect(mayContainPii(text)).toBe(true);
    const found = findPii(text);
    expect(found).toEqual(findPiiFull(text));
    expect(found.map((m) => m.kind)).toContain(kind);
  });

  it('the same shapes with their trigger broken are not matched', () => {
    // One lookalike or case change per example, aimed at the trigger itself.
    const broken = [
      '-----BEGlN PRIVATE KEY-----', // l for I
      'eYJhbGciOi.eYJz.',
      'AKlAABCDEFGHIJKLMNOP',
      'ghx_' + 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJ',
      'SG,' + 'a'.repeat(22) + '.' + 'B'.repeat(43),
      'b\u0435arer abcdefghijKLMNOPQRST', // Cyrillic е
      '\uFF22earer abcdefghijKLMNOPQRST', // full-width B
      'pwd=abcdefg\uFF11', // full-width 1
      'pw=abcdefg1', // no secret word: the generic detector's gate
      'to\u212Aen=abcdefg1', // Kelvin sign for k
      'a\uFF20b.io', // full-width @
      'tel: \u0665\u0665\u0665\u0660\u0661\u0660\u0660', // Arabic-Indic digits
    ];
    for (const text of broken) {
      expect(findPiiFull(text), text).toEqual([]);
      expect(untriggeredHits(text), text).toEqual([]);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Generators.

const chars = (s: string): fc.Arbitrary<string> => fc.constantFrom(...s.split(''));
const UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
const LOWER = 'abcdefghijklmnopqrstuvwxyz';
const DIGITS = '0123456789';
const LETTERS = UPPER + LOWER;
const ALNUM = LETTERS + DIGITS;
const run = (alphabet: string, minLength: number, maxLength: number): fc.Arbitrary<string> =>
  fc.string({ unit: chars(alphabet), minLength, maxLength });
const digitsOf = (n: number): fc.Arbitrary<string> => run(DIGITS, n, n);
/** A token body, half the time without digits: then only the shape's literal can trigger. */
const body = (alphabet: string, minLength: number, maxLength: number): fc.Arbitrary<string> =>
  fc.oneof(run(alphabet.replace(/[0-9]/g, ''), minLength, maxLength), run(alphabet, minLength, maxLength));

/** Any UTF-16 code unit, so lone surrogates and controls appear too. */
const codeUnits = fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)), maxLength: 40 });
const unicode = fc.string({ unit: 'binary', maxLength: 40 });
const asciiWithControls = fc.string({ unit: 'binary-ascii', maxLength: 60 });
const context = fc.oneof(unicode, codeUnits, asciiWithControls, fc.constantFrom('', ' ', '\n', 'x', '1', '.', '-', '@'));

function luhnComplete(body: string): string {
  for (let d = 0; d <= 9; d++) if (luhnOk(`${body}${d}`)) return `${body}${d}`;
  throw new Error('unreachable');
}

function ibanWithCheck(country: string, bban: string): string {
  for (let c = 2; c <= 98; c++) {
    const iban = country + String(c).padStart(2, '0') + bban;
    if (ibanChecksumOk(iban)) return iban;
  }
  throw new Error('unreachable');
}

/** A real value of each shape, labelled with the detector that must find it. */
const realValue: fc.Arbitrary<[string, string]> = fc.oneof(
  fc
    .tuple(
      fc.constantFrom('', 'RSA ', 'EC ', 'OPENSSH ', 'ENCRYPTED '),
      fc.array(body(LETTERS + DIGITS + '+/', 16, 64), { maxLength: 4 }),
      fc.boolean(),
    )
    .map(([label, lines, end]): [string, string] => [
      'PEM',
      `-----BEGIN ${label}PRIVATE KEY-----\n${lines.join('\n')}` + (end ? `\n-----END ${label}PRIVATE KEY-----` : ''),
    ]),
  fc
    .tuple(body(ALNUM + '_-', 7, 40), body(ALNUM + '_-', 4, 40), body(ALNUM + '_-', 0, 40))
    .map(([h, p, s]): [string, string] => ['JWT', `eyJ${h}.${p}.${s}`]),
  fc.tuple(fc.constantFrom('AKIA', 'ASIA'), body(UPPER + DIGITS, 16, 16)).map(([p, b]): [string, string] => ['API_KEY AWS', p + b]),
  fc.tuple(chars('pousr'), body(ALNUM, 36, 60)).map(([c, b]): [string, string] => ['API_KEY GitHub', `gh${c}_${b}`]),
  body(ALNUM + '_', 22, 60).map((b): [string, string] => ['API_KEY GitHub PAT', `github_pat_${b}`]),
  body(ALNUM + '_-', 20, 64).map((b): [string, string] => ['API_KEY GitLab', `glpat-${b}`]),
  body(ALNUM, 36, 36).map((b): [string, string] => ['API_KEY npm', `npm_${b}`]),
  fc
    .tuple(chars('abeoprs'), body(ALNUM + '-', 9, 40), chars(DIGITS))
    .map(([c, b, d]): [string, string] => ['API_KEY Slack', `xox${c}-${d}${b}`]),
  body(ALNUM + '_/-', 20, 60).map((b): [string, string] => ['API_KEY Slack webhook', `https://hooks.slack.com/services/${b}`]),
  fc
    .tuple(fc.constantFrom('sk', 'rk'), fc.constantFrom('live', 'test'), body(ALNUM, 16, 40))
    .map(([a, b, c]): [string, string] => ['API_KEY Stripe', `${a}_${b}_${c}`]),
  body(ALNUM + '_-', 35, 35).map((b): [string, string] => ['API_KEY Google', `AIza${b}`]),
  fc.tuple(body(ALNUM + '_-', 22, 22), body(ALNUM + '_-', 43, 43)).map(([a, b]): [string, string] => ['API_KEY SendGrid', `SG.${a}.${b}`]),
  body(ALNUM, 27, 37).map((b): [string, string] => ['API_KEY Hugging Face', `hf_aB3${b}`]),
  body(ALNUM + '_', 17, 60).map((b): [string, string] => ['API_KEY sk-', `sk-aB3${b}`]),
  fc
    .tuple(
      fc.constantFrom('api_key', 'SECRET', 'client-secret', 'GITHUB_TOKEN', 'db_password', 'pwd', 'Auth.Token'),
      fc.constantFrom('=', ': ', ' = ', '": "'),
      run(LETTERS, 1, 20),
      chars(DIGITS),
      run(ALNUM + '_-', 6, 30),
    )
    .map(([k, sep, a, d, b]): [string, string] => ['GENERIC_SECRET', `${k}${sep}${a}${d}${b}`]),
  fc
    .tuple(
      fc.constantFrom('Bearer', 'bearer', 'BEARER', 'bEaReR'),
      fc.constantFrom(' ', '\t', '  '),
      fc.oneof(
        // Letters only: only the word "bearer" can trigger it.
        fc.tuple(run(UPPER, 1, 10), run(LOWER, 1, 10), run(LETTERS, 18, 40)).map(([a, b, c]) => a + b + c),
        fc.tuple(run(LETTERS, 1, 20), chars(DIGITS), run(ALNUM + '-_~+/', 10, 40)).map(([a, b, c]) => a + b + c),
      ),
    )
    .map(([w, sp, t]): [string, string] => ['BEARER', `${w}${sp}${t}`]),
  fc
    .tuple(fc.boolean(), digitsOf(18), run(UPPER, 4, 4), digitsOf(14))
    .map(([de, d18, bank, d14]): [string, string] => ['IBAN', de ? ibanWithCheck('DE', d18) : ibanWithCheck('GB', bank + d14)]),
  fc
    .tuple(fc.constantFrom('4', '51', '55', '6011'), digitsOf(14))
    .map(([prefix, rest]): [string, string] => ['CARD', luhnComplete((prefix + rest).slice(0, 15))]),
  fc
    .tuple(fc.integer({ min: 1, max: 899 }), fc.integer({ min: 1, max: 99 }), fc.integer({ min: 1, max: 9999 }))
    .filter(([a]) => a !== 666)
    .map(([a, g, s]): [string, string] => [
      'SSN',
      `${String(a).padStart(3, '0')}-${String(g).padStart(2, '0')}-${String(s).padStart(4, '0')}`,
    ]),
  fc
    .tuple(run(LOWER + DIGITS, 1, 1), run(LOWER + DIGITS + '._%+-', 0, 20), run(LOWER + DIGITS, 1, 20), run(LOWER, 2, 6))
    // "icon@2x.png" is an asset name, not an address.
    .filter(([, , domain]) => !/^[0-9]+x$/.test(domain))
    .map(([a, b, d, t]): [string, string] => ['EMAIL', `${a}${b}@${d}.${t}`]),
  fc
    .tuple(chars('23456789'), digitsOf(2), chars('23456789'), digitsOf(2), digitsOf(4), fc.constantFrom(' ', '-', '.'))
    .filter(([a, b, c, d, e]) => !/([0-9])\1{6}/.test(a + b + c + d + e))
    .map(([a, b, c, d, e, sep]): [string, string] => ['PHONE', `+1 ${a}${b}${sep}${c}${d}${sep}${e}`]),
  fc
    .tuple(
      fc.integer({ min: 1, max: 126 }),
      fc.integer({ min: 0, max: 255 }),
      fc.integer({ min: 0, max: 255 }),
      fc.integer({ min: 1, max: 254 }),
    )
    .map((o): [string, string] => ['IPV4', o.join('.')]),
  fc
    // Hex letters only half the time (body()), so that only the IPv6 trigger carries it.
    .tuple(fc.array(body('abcdef0123456789', 1, 4), { minLength: 8, maxLength: 8 }), fc.boolean())
    .map(([groups, compress]): [string, string] => [
      'IPV6',
      compress ? `${(groups[0] ?? 'abc').padEnd(3, 'e')}::${groups[1] ?? 'f'}` : groups.join(':'),
    ]),
);

// Pieces of the detectors' alphabets and shapes, with and without their triggers, and their
// lookalikes: Unicode digits and "@"s, case and script variants of the literal prefixes.
const nearMissPiece = fc.oneof(
  run(LETTERS + '_-', 1, 50),
  run(LETTERS + '+/=', 16, 40),
  run(LETTERS + '.-_~+/', 1, 30),
  run(' .-()+:=#"\'\t\n\u00A0\u202F\\/', 1, 4),
  fc.constantFrom(
    // Literal prefixes, intact (stripped again below where a test wants them gone) and broken.
    '-----BEGIN ',
    '-----BEGIN RSA PRIVATE KEY-----',
    '-----END PRIVATE KEY-----',
    'PRIVATE KEY-----',
    '-----begin ',
    '----BEGIN ',
    '-----BEGIN',
    'BEGIN PRIVATE KEY',
    'Proc-Type:',
    'Comment: ',
    'eyJ',
    'eyj',
    'EYJ',
    'ey',
    'J',
    'e',
    'y',
    '.',
    'AKIA',
    'ASIA',
    'AKI',
    'KIA',
    'A',
    'I',
    'ghp_',
    'gh',
    'ghx_',
    'github_pat_',
    'github_pat',
    'glpat-',
    'glpat_',
    'npm_',
    'npm-',
    'xoxb-',
    'xox',
    'https://hooks.slack.com/services/',
    'hooks.slack.com',
    'sk_live_',
    'rk_test_',
    'sk_live',
    'AIza',
    'AIz',
    'SG.',
    'SG',
    'S',
    'G',
    'hf_',
    'sk-',
    'pk_live_',
    'Bearer ',
    'bearer\t',
    'BEARER  ',
    'bearer',
    'beare',
    'earer',
    'b',
    'B',
    'r',
    'R',
    'token=',
    'api_key: ',
    '"password": "',
    'secret=',
    'pwd=',
    'AUTH_TOKEN=',
    'tel: ',
    '::',
    ':',
    'fe80::',
    'ab:cd',
    '10.0.0.',
    '\uFF1A\uFF1A', // full-width colons
    'phone ',
    'call me at ',
    'SSN: ',
    'social security number ',
    '电话',
    'Tel.: ',
    '@',
    'mailto:',
    'git@',
    '+',
    '+1 ',
    '(',
    ')',
    '-',
    '_',
    '.',
    ' ',
    '\u0000',
    // Lookalikes that must not count as triggers because the detectors do not accept them.
    '\uFF10\uFF11\uFF12\uFF13\uFF14\uFF15\uFF16\uFF17\uFF18\uFF19', // full-width digits
    '\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669', // Arabic-Indic digits
    '\u0966\u0967\u0968',
    '\u00B2\u00B3\u00B9',
    '\u00BD',
    '\u216B',
    '\u{1D7CE}', // Devanagari, super, ½, Ⅻ
    '\uFF20',
    '\uFE6B',
    '\u24D0', // full-width @, small @, ⓐ
    '\u212A',
    '\u017F',
    '\u0131',
    '\u0130', // Kelvin, long s, dotless i, dotted I
    'b\u0435arer ',
    '\uFF22\uFF45\uFF41\uFF52\uFF45\uFF52 ',
    'BEAR\u0395R ', // Cyrillic е, full-width, Greek Ε
    '\u0410KIA',
    'AI\u0437a',
    'ey\u0408',
    '\uFF33\uFF27.', // Cyrillic А, з, Ј; full-width SG
    '\u2014\u2014\u2014\u2014\u2014BEGIN ',
    '\u2010\u2010\u2010\u2010\u2010BEGIN ', // em and hyphen dashes
    '\u00E9',
    '\u0301',
    '😀',
    'ß',
    'ǅ',
    'İ',
  ),
  fc.string({ unit: 'binary', maxLength: 6 }),
);
const nearMiss = fc.array(nearMissPiece, { maxLength: 30 }).map((parts) => parts.join(''));

// The documented trigger set (docs/pii.md, "Prefilter"). Stripping it to a fixpoint leaves
// text that the prefilter must wave through and that no detector may match.
const TRIGGER_SET =
  /[0-9@]|::|[0-9A-Fa-f]:[0-9A-Fa-f]|-----BEGIN |eyJ|[Bb][Ee][Aa][Rr][Ee][Rr]|AKIA|ASIA|gh[pousr]_|github_pat_|glpat-|npm_|https:\/\/hooks\.slack\.com\/|[sr]k_(?:live|test)_|AIza|SG\./g;
function stripTriggers(text: string): string {
  let s = text;
  for (let prev = ''; prev !== s;) {
    prev = s;
    s = s.replace(TRIGGER_SET, '');
  }
  return s;
}

// Lookalikes: every trigger occurrence loses its first character to a non-ASCII twin (the
// full-width form, or for digits sometimes another script's digit), to a fixpoint. What is
// left reads like the original to a person, and must read like nothing to the detectors.
const DIGIT_TWINS = [0xff10, 0x0660, 0x0966, 0x1d7ce];
function withLookalikes(text: string, pick: number): string {
  let s = text;
  for (let prev = ''; prev !== s;) {
    prev = s;
    s = s.replace(TRIGGER_SET, (m) => {
      const c = m.charCodeAt(0);
      const twin =
        c >= 0x30 && c <= 0x39
          ? String.fromCodePoint((DIGIT_TWINS[pick % DIGIT_TWINS.length] as number) + c - 0x30)
          : String.fromCharCode(0xff01 + c - 0x21);
      return twin + m.slice(1);
    });
  }
  return s;
}

// ---------------------------------------------------------------------------------------------

describe('prefilter property 1: no trigger ⇒ nothing found', () => {
  /** Checks the implication per detector (one ungated pass) and for the full multi-pass scan. */
  function check(text: string): void {
    expect(untriggeredHits(text)).toEqual([]);
    if (!mayContainPii(text)) {
      expect(findPiiFull(text)).toEqual([]);
      expect(findPii(text)).toEqual([]);
    }
  }

  it.each([
    ['arbitrary Unicode', unicode],
    ['arbitrary UTF-16 code units (lone surrogates, controls)', codeUnits],
    ['ASCII with controls', asciiWithControls],
    ['detector alphabets and near misses', nearMiss],
  ] as const)(
    '%s (8,000 runs)',
    (_name, arb) => {
      fc.assert(fc.property(arb, check), runs(8_000));
    },
    TIMEOUT,
  );

  it(
    'near misses with every trigger stripped: the prefilter says no and the full scan agrees (10,000 runs)',
    () => {
      fc.assert(
        fc.property(nearMiss, fc.array(context, { maxLength: 3 }), (text, extra) => {
          const stripped = stripTriggers(text + extra.join(''));
          expect(mayContainPii(stripped)).toBe(false);
          expect(findPiiFull(stripped)).toEqual([]);
          expect(untriggeredHits(stripped)).toEqual([]);
        }),
        runs(10_000),
      );
    },
    TIMEOUT,
  );

  it(
    'real values with every trigger stripped leave nothing detectable (5,000 runs)',
    () => {
      fc.assert(
        fc.property(context, realValue, context, (before, [, value], after) => {
          const stripped = stripTriggers(before + value + after);
          expect(mayContainPii(stripped)).toBe(false);
          expect(findPiiFull(stripped)).toEqual([]);
        }),
        runs(5_000),
      );
    },
    TIMEOUT,
  );

  it(
    'real values with every trigger turned into a lookalike leave nothing detectable (5,000 runs)',
    () => {
      fc.assert(
        fc.property(context, realValue, context, fc.nat(), (before, [, value], after, pick) => {
          const twin = withLookalikes(before + value + after, pick);
          expect(mayContainPii(twin)).toBe(false);
          expect(findPiiFull(twin)).toEqual([]);
          expect(untriggeredHits(twin)).toEqual([]);
        }),
        runs(5_000),
      );
    },
    TIMEOUT,
  );
});

describe('prefilter property 2: embedded real values always pass it', () => {
  it(
    'every generated value is really detected on its own (5,000 runs)',
    () => {
      fc.assert(
        fc.property(realValue, ([detector, value]) => {
          const text = ` ${value} `;
          const trace = traceDetectors(text).find((d) => d.name === detector);
          expect(trace?.candidates, `${detector}: ${value}`).toBeGreaterThan(0);
          expect(trace?.triggered).toBe(true);
          expect(findPiiFull(text).length).toBeGreaterThan(0);
        }),
        runs(5_000),
      );
    },
    TIMEOUT,
  );

  it(
    'inside arbitrary text: the prefilter passes and findPii equals findPiiFull (10,000 runs)',
    () => {
      fc.assert(
        fc.property(
          fc.array(fc.oneof(context, nearMissPiece), { maxLength: 4 }),
          fc.array(realValue, { minLength: 1, maxLength: 3 }),
          fc.array(fc.oneof(context, nearMissPiece), { maxLength: 4 }),
          (before, values, after) => {
            const text = before.join('') + values.map(([, v]) => v).join(' ') + after.join('');
            expect(mayContainPii(text)).toBe(true);
            expect(untriggeredHits(text)).toEqual([]);
            expect(findPii(text)).toEqual(findPiiFull(text));
          },
        ),
        runs(10_000),
      );
    },
    TIMEOUT,
  );
});

describe('prefilter property 3: applyPiiPolicy is the same with and without it', () => {
  const piece = fc.oneof(
    { weight: 3, arbitrary: nearMissPiece },
    { weight: 1, arbitrary: realValue.map(([, v]) => v) },
    { weight: 1, arbitrary: context },
  );
  const message = fc.array(piece, { maxLength: 25 }).map((parts) => parts.join(''));

  it(
    'redact and reject, 20,000 runs',
    () => {
      let skipped = 0;
      let found = 0;
      fc.assert(
        fc.property(message, fc.constantFrom('redact', 'reject'), (text, mode) => {
          const fast = applyPiiPolicy(text, mode);
          const full = applyPiiPolicy(text, mode, { prefilter: false });
          expect(fast).toEqual(full);
          if (!mayContainPii(text)) skipped++;
          if (full.found.length > 0) found++;
        }),
        runs(20_000),
      );
      // Both sides of the prefilter are exercised, not just one.
      expect(skipped).toBeGreaterThan(2000 * SCALE);
      expect(found).toBeGreaterThan(2000 * SCALE);
    },
    TIMEOUT,
  );
});
