import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { findPii, ibanChecksumOk, luhnOk } from '../../src/daemon/pii/pii-detectors.js';
import type { PiiKind, PiiMatch } from '../../src/daemon/pii/pii-detectors.js';
import { applyPiiPolicy, redactionMarker } from '../../src/daemon/pii/pii-policy.js';
import type { PiiMode } from '../../src/daemon/pii/pii-policy.js';

/** Matches rendered as `KIND:text` so failures show what was found, not just offsets. */
function show(text: string): string[] {
  return findPii(text).map((m) => `${m.kind}:${text.slice(m.start, m.end)}`);
}

function expectSingle(text: string, kind: PiiKind, value: string): void {
  expect(show(text)).toEqual([`${kind}:${value}`]);
}

const JWT =
  'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c';
const PEM_RSA = [
  '-----BEGIN RSA PRIVATE KEY-----',
  'MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun',
  'VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK',
  '-----END RSA PRIVATE KEY-----',
].join('\n');
const GHP = 'ghp_' + 'R7xk2Qm9Lp4Vt8Zw1Ny6Hb3Jc5Df0Gs2Ae4K';

describe('findPii: e-mail', () => {
  it.each([
    ['write to john.doe+tag@example.co.uk today', 'john.doe+tag@example.co.uk'],
    ['<alice_b@mail.example.com>', 'alice_b@mail.example.com'],
    ['mailto:Bob-99@Example.ORG.', 'Bob-99@Example.ORG'],
    ['José: josé@exämple.de', 'josé@exämple.de'],
    ['https://user:s3cr3t@host.example.com/x', 's3cr3t@host.example.com'],
  ])('%s', (text, value) => {
    expectSingle(text, 'EMAIL', value);
  });
});

describe('findPii: phone', () => {
  it.each([
    ['call +14155550100 now', '+14155550100'],
    ['call +1 415 555 0100 now', '+1 415 555 0100'],
    ['office (415) 555-0100.', '(415) 555-0100'],
    ['dots 415.555.0100', '415.555.0100'],
    ['dashes 415-555-0100', '415-555-0100'],
    ['toll free 1-800-555-0199', '1-800-555-0199'],
    ['+1 (415) 555-0100', '+1 (415) 555-0100'],
    ['London +44 20 7946 0958', '+44 20 7946 0958'],
    ['London +44 (0)20 7946 0958', '+44 (0)20 7946 0958'],
    ['London 020 7946 0958', '020 7946 0958'],
    ['(020) 7946 0958', '(020) 7946 0958'],
    ['Berlin +49 30 12345678', '+49 30 12345678'],
    ['Berlin 030 12345678', '030 12345678'],
    ['Paris 06 12 34 56 78', '06 12 34 56 78'],
    ['Paris +33 6 12 34 56 78', '+33 6 12 34 56 78'],
    ['from abroad 0044 20 7946 0958', '0044 20 7946 0958'],
    ['Beijing +8613800138000', '+8613800138000'],
    ['tel: 5550100', '5550100'],
    ['Phone number: 4155550100', '4155550100'],
    ['call me at 555-0100', '555-0100'],
    ['Tel.: 030 1234567', '030 1234567'],
    ['电话13800138000', '13800138000'],
    ['+1 415 555 0100 2 times? no: +1 415 555 0100 ext', '+1 415 555 0100'],
  ])('%s', (text, value) => {
    const found = show(text);
    expect(found[0]).toBe(`PHONE:${value}`);
    expect(found.every((f) => f.startsWith('PHONE:'))).toBe(true);
  });

  it('trims trailing groups that would push a number past 15 digits', () => {
    expect(show('+1 415 555 0100 2024 2025 x')).toEqual(['PHONE:+1 415 555 0100 2024']);
  });
});

describe('findPii: payment cards', () => {
  it.each([
    ['visa 4111111111111111', '4111111111111111'],
    ['visa 4111 1111 1111 1111', '4111 1111 1111 1111'],
    ['visa 4111-1111-1111-1111', '4111-1111-1111-1111'],
    ['visa13 4222222222222', '4222222222222'],
    ['mc 5555555555554444', '5555555555554444'],
    ['mc2 2223003122003222', '2223003122003222'],
    ['amex 378282246310005', '378282246310005'],
    ['amex 3782 822463 10005', '3782 822463 10005'],
    ['discover 6011111111111117', '6011111111111117'],
    ['jcb 3530111333300000', '3530111333300000'],
    ['diners 30569309025904', '30569309025904'],
  ])('%s', (text, value) => {
    expect(show(text)[0]).toBe(`PAYMENT_CARD:${value}`);
  });

  it('finds both cards in a CSV row', () => {
    expect(show('cards 4111111111111111,5555555555554444')).toEqual(['PAYMENT_CARD:4111111111111111', 'PAYMENT_CARD:5555555555554444']);
  });

  it('finds every card in a list', () => {
    expect(show('4111111111111111, 5555 5555 5555 4444 and 378282246310005')).toEqual([
      'PAYMENT_CARD:4111111111111111',
      'PAYMENT_CARD:5555 5555 5555 4444',
      'PAYMENT_CARD:378282246310005',
    ]);
  });

  // A card-shaped run that fails Luhn or has no card-network prefix is claimed as nothing:
  // it must not be reported as a card, nor as a phone or anything else inside it.
  it.each([
    'order 1234567890123456',
    'order 4111111111111112',
    'order 4111 1111 1111 1112',
    'order 5555-5555-5555-4445',
    'order 1234567890123452', // passes Luhn, but no card network starts with 12
    'ms timestamp 1764499519123',
    'ISBN 9783161484100',
    'order 0123 4567 8901 2345',
  ])('digit run that is not a card: %s', (text) => {
    expect(show(text)).toEqual([]);
  });

  it('luhn premise of the near-miss cases', () => {
    expect(luhnOk('4111111111111111')).toBe(true);
    expect(luhnOk('4111111111111112')).toBe(false);
    expect(luhnOk('1234567890123456')).toBe(false);
    expect(luhnOk('1234567890123452')).toBe(true);
  });
});

describe('findPii: SSN', () => {
  it.each([
    ['ssn 123-45-6789', '123-45-6789'],
    ['078-05-1120', '078-05-1120'],
    ['SSN: 123456789', '123456789'],
    ['social security number 123 45 6789', '123 45 6789'],
  ])('%s', (text, value) => {
    expectSingle(text, 'SSN', value);
  });

  it.each(['000-12-3456', '666-12-3456', '900-12-3456', '999-99-9999', '123-00-6789', '123-45-0000', 'SSN: 000123456'])(
    'never-issued SSN %s is not reported as anything',
    (ssn) => {
      expect(show(`id ${ssn} end`)).toEqual([]);
    },
  );

  it('an SSN-shaped value with a leading 0 is an SSN, not a phone', () => {
    expectSingle('012-34-5678', 'SSN', '012-34-5678');
  });
});

describe('findPii: IBAN', () => {
  it.each([
    'DE89 3704 0044 0532 0130 00',
    'DE89370400440532013000',
    'de89370400440532013000',
    'GB82 WEST 1234 5698 7654 32',
    'GB82WEST12345698765432',
    'NL91ABNA0417164300',
    'FR14 2004 1010 0505 0001 3M02 606',
    'BE68539007547034',
    'CH9300762011623852957',
    'NO9386011117947',
  ])('%s', (iban) => {
    expectSingle(`pay to ${iban}, thanks`, 'IBAN', iban);
  });

  it.each(['DE88 3704 0044 0532 0130 00', 'DE88370400440532013000', 'GB82WEST12345698765433', 'NL91ABNA0417164301'])(
    'bad checksum %s matches nothing (not even the digit groups inside)',
    (iban) => {
      expect(show(`pay to ${iban}, thanks`)).toEqual([]);
    },
  );

  it('checksum premise', () => {
    expect(ibanChecksumOk('DE89370400440532013000')).toBe(true);
    expect(ibanChecksumOk('DE88370400440532013000')).toBe(false);
  });

  it('needs the exact country length and a boundary', () => {
    expect(show('DE8937040044053201300')).toEqual([]); // one short
    expect(show('XX89370400440532013000')).toEqual([]); // no such country
    expect(show('DE89370400440532013000ABC')).toEqual([]); // continues as a word
  });

  it('finds adjacent IBANs separated by spaces', () => {
    expect(show('DE89 3704 0044 0532 0130 00 GB82 WEST 1234 5698 7654 32')).toEqual([
      'IBAN:DE89 3704 0044 0532 0130 00',
      'IBAN:GB82 WEST 1234 5698 7654 32',
    ]);
  });
});

describe('findPii: secrets', () => {
  it('PEM private keys, whole block', () => {
    expectSingle(`here:\n${PEM_RSA}\nbye`, 'PRIVATE_KEY', PEM_RSA);
    for (const label of ['', 'EC ', 'OPENSSH ', 'ENCRYPTED ', 'DSA ']) {
      const pem = `-----BEGIN ${label}PRIVATE KEY-----\nMIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8w\n-----END ${label}PRIVATE KEY-----`;
      expectSingle(`x ${pem} y`, 'PRIVATE_KEY', pem);
    }
    const pgp = '-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0AAAAB\n-----END PGP PRIVATE KEY BLOCK-----';
    expectSingle(pgp, 'PRIVATE_KEY', pgp);
  });

  it('PEM with JSON-escaped newlines', () => {
    const pem = '-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----';
    expectSingle(`{"key":"${pem}"}`, 'PRIVATE_KEY', pem);
  });

  it('a truncated PEM key is still redacted up to its last base64 line', () => {
    const head = '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nMIIEvQIBADANBgkq';
    expectSingle(`${head}\n\nthanks!`, 'PRIVATE_KEY', head);
  });

  it('public keys and certificates are not private keys', () => {
    expect(show('-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----')).toEqual([]);
    expect(show('-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----')).toEqual([]);
  });

  it.each([
    ['aws AKIAIOSFODNN7EXAMPLE', 'AKIAIOSFODNN7EXAMPLE'],
    ['aws ASIAY34FZKBOKMUTVV7A', 'ASIAY34FZKBOKMUTVV7A'],
    [`gh ${GHP}`, GHP],
    ['gho_' + 'a1B2'.repeat(9), 'gho_' + 'a1B2'.repeat(9)],
    [
      'github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456',
      'github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456',
    ],
    ['slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx', 'xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx'],
    ['stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc', 'sk_live_4eC39HqLyjWDarjtT1zdp7dc'],
    ['stripe rk_live_51H8xYzAbCdEfGhIjKlMnOp', 'rk_live_51H8xYzAbCdEfGhIjKlMnOp'],
    ['google AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q', 'AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q'],
    ['openai sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z', 'sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z'],
    ['openai sk-' + 'T3BlbkFJ9x'.repeat(4), 'sk-' + 'T3BlbkFJ9x'.repeat(4)],
    ['npm npm_' + 'aB3'.repeat(12), 'npm_' + 'aB3'.repeat(12)],
    ['env API_KEY=abc123def456ghi', 'abc123def456ghi'],
    ['yaml client_secret: "9f8e7d6c5b4a3f2e1d"', '9f8e7d6c5b4a3f2e1d'],
    ['json {"password": "hunter22x"}', 'hunter22x'],
    ['GITHUB_TOKEN=v1.2a3b4c5d6e7f', 'v1.2a3b4c5d6e7f'],
  ])('%s', (text, value) => {
    expectSingle(text, 'API_KEY', value);
  });

  it('bearer tokens: only the token is redacted', () => {
    expectSingle('Authorization: Bearer abcDEF0123456789ghiJKL', 'BEARER_TOKEN', 'abcDEF0123456789ghiJKL');
    expectSingle('authorization: bearer 0a1b2c3d4e5f6a7b8c9d.', 'BEARER_TOKEN', '0a1b2c3d4e5f6a7b8c9d');
    expectSingle('-H "Bearer mF_9.B5f-4.1JqM"', 'BEARER_TOKEN', 'mF_9.B5f-4.1JqM');
  });

  it('JWTs, including alg=none and JWE', () => {
    expectSingle(`token ${JWT} end`, 'JWT', JWT);
    const none = 'eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.';
    expectSingle(`x ${none} y`, 'JWT', none);
    const jwe =
      'eyJhbGciOiJSU0EtT0FFUCJ9.OKOawDo13gRp2ojaHV7LFpZcgV7T6DVZKTyKOMTYUmKoTCVJRgckCL9kiMT03JGe.48V1_ALb6US04U3b.5eym8TW_c8SuK0ltJ3rpYIzOeDQz7TALvtu6UG9oMo4vpzs9tX_EFShS8iB7j6ji.XFBoMYUZodetZdvTiFvSkQ';
    expectSingle(jwe, 'JWT', jwe);
  });
});

describe('findPii: overlap resolution', () => {
  it('a JWT beats the bearer token that carries it', () => {
    expectSingle(`Authorization: Bearer ${JWT}`, 'JWT', JWT);
    expectSingle(`Authorization: Bearer ${JWT}.`, 'JWT', JWT);
  });

  it('a vendor key shape beats the bearer / assignment that carries it', () => {
    expectSingle(`Authorization: Bearer ${GHP}`, 'API_KEY', GHP);
    expectSingle('aws_access_key_id=AKIAIOSFODNN7EXAMPLE', 'API_KEY', 'AKIAIOSFODNN7EXAMPLE');
    expectSingle(`token: ${JWT}`, 'JWT', JWT);
  });

  it('a PEM block beats everything inside it', () => {
    const pem = [
      '-----BEGIN OPENSSH PRIVATE KEY-----',
      'Comment: alice@example.com +1 415 555 0100',
      'b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW',
      JWT,
      '4111111111111111 AKIAIOSFODNN7EXAMPLE',
      '-----END OPENSSH PRIVATE KEY-----',
    ].join('\n');
    expectSingle(`key:\n${pem}\n`, 'PRIVATE_KEY', pem);
  });

  it('an IBAN beats the card- and phone-shaped groups inside it', () => {
    expectSingle('DE89 3704 0044 0532 0130 00', 'IBAN', 'DE89 3704 0044 0532 0130 00');
  });

  it('an e-mail beats digits inside it', () => {
    expectSingle('john4155550100@example.com', 'EMAIL', 'john4155550100@example.com');
  });

  it('results are sorted and disjoint across kinds', () => {
    const text = `a@b.io ${JWT} 4111111111111111 +1 415 555 0100 123-45-6789 DE89370400440532013000 ${PEM_RSA}`;
    expect(findPii(text).map((m) => m.kind)).toEqual(['EMAIL', 'JWT', 'PAYMENT_CARD', 'PHONE', 'SSN', 'IBAN', 'PRIVATE_KEY']);
  });
});

describe('findPii: near misses (must find nothing)', () => {
  it.each([
    '2026-11-30T10:55:19.123Z',
    'created 2026-11-30 10:55:19',
    'version 1.2.3.4 and v10.20.30.40 and 2.0.0-rc.1+build.5',
    // IP addresses are IP_ADDRESS since issue 22 (test/unit/pii-network.test.ts); version numbers are not.
    'short numbers 12345 and 42 and 1234567',
    'uuid 123e4567-e89b-12d3-a456-426614174000',
    'uuid 550e8400-e29b-41d4-a716-446655440000',
    'commit 9fceb02d0ae598e95dc970b74767f19372d61af8',
    'commit 4111111 fix',
    'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    'meet @ noon',
    'ping @alice and @bob-2 about it',
    'ssh user@localhost',
    'icon@2x.png and logo@1.5x.jpg',
    'git@github.com:org/repo.git',
    'npm i @types/node@20.19.43 vitest@4.1.12',
    'unix time 1764499519',
    'pages 100-1000, 2024-2025',
    'price $1,234,567.89 or 1.234.567,89 €',
    'pi 3.14159265358979 and +3.14159265',
    'growth +10000000 users',
    'random 0.4111111111111111',
    'coordinates +37.7749, -122.4194',
    'dates 01.12.2026, 30.11.2026, 01-12-2026',
    'the bearer of this letter is entitled to a refund',
    'Authorization: Bearer YOUR_TOKEN_HERE',
    'Authorization: Bearer <token>',
    'interface Cfg { token: string; apiKey: string | null; password: Buffer }',
    'pip install sk-learn-extension-tools-for-everyone',
    'task-abcdefghijklmnopqrstuvwxyz and ask-me-anything-about-everything',
    'secret: nothing here',
    'a JWT starts with eyJ, like eyJhbGciOi',
    'base64 SGVsbG8gd29ybGQhIEhlbGxvIHdvcmxkIQ==',
    'colors #ff00ff #00ff00',
    'time 10:55:19 and 23:59',
    'order ID-4111111111111111 and REF_4155550100',
    'Phone numbers look like 555-XXXX',
    'ISBN 978-3-16-148410-0',
  ])('%s', (text) => {
    expect(show(text)).toEqual([]);
  });
});

describe('findPii: Unicode', () => {
  it('reports UTF-16 offsets', () => {
    const text = '😀 mail a@b.co 😀';
    const [m] = findPii(text);
    expect(m).toEqual({ kind: 'EMAIL', start: 8, end: 14 });
  });

  it('handles astral characters, combining marks and RTL text around matches', () => {
    const text = '𝔘𝔫𝔦 مرحبا e\u0301 +1 415 555 0100 👩‍👩‍👧 4111111111111111';
    expect(show(text)).toEqual(['PHONE:+1 415 555 0100', 'PAYMENT_CARD:4111111111111111']);
  });

  const wellFormed = (s: string): boolean => !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

  // Strings that mix arbitrary Unicode with fragments of every detector, so the properties are
  // exercised on real matches, near misses and garbage alike.
  const fragment = fc.oneof(
    fc.string({ unit: 'binary', maxLength: 8 }),
    fc.constantFrom(
      'a@b.io',
      '+1 415 555 0100',
      '4111111111111111',
      '123-45-6789',
      'DE89370400440532013000',
      JWT,
      PEM_RSA,
      'Bearer abcDEF0123456789ghiJKL',
      GHP,
      '-----BEGIN PRIVATE KEY-----',
      '@',
      '+',
      '.',
      '-',
      ' ',
      '\n',
      '1',
      '0',
      'eyJ',
      '😀',
      'é',
      'x',
      '(',
      ')',
      'token=',
      'tel: ',
      'AKIA',
    ),
  );
  const mixed = fc.array(fragment, { maxLength: 40 }).map((parts) => parts.join(''));

  it('matches are in bounds, disjoint, sorted and never split a surrogate pair', () => {
    fc.assert(
      fc.property(mixed, (text) => {
        const ms = findPii(text);
        let prev = 0;
        for (const m of ms) {
          expect(m.start).toBeGreaterThanOrEqual(prev);
          expect(m.end).toBeGreaterThan(m.start);
          expect(m.end).toBeLessThanOrEqual(text.length);
          expect(wellFormed(text.slice(m.start, m.end))).toBe(true);
          prev = m.end;
        }
      }),
      { numRuns: 300 },
    );
  });

  it('redaction is idempotent and keeps content well-formed', () => {
    fc.assert(
      fc.property(mixed, (text) => {
        const once = applyPiiPolicy(text, 'redact');
        expect(wellFormed(once.content)).toBe(true);
        const twice = applyPiiPolicy(once.content, 'redact');
        expect(twice.content).toBe(once.content);
        expect(twice.found).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  it('a known value is found whatever non-alphanumeric context surrounds it', () => {
    const samples: Array<[string, PiiKind]> = [
      ['a@b.io', 'EMAIL'],
      ['+1 415 555 0100', 'PHONE'],
      ['4111111111111111', 'PAYMENT_CARD'],
      ['123-45-6789', 'SSN'],
      ['DE89370400440532013000', 'IBAN'],
      [JWT, 'JWT'],
      [GHP, 'API_KEY'],
    ];
    const ctx = fc.string({ unit: fc.constantFrom(' ', '\n', '\t', '😀', '«', '"', "'", '<', '>', '|', ';', '!'), maxLength: 6 });
    fc.assert(
      fc.property(ctx, fc.constantFrom(...samples), ctx, (before, [value, kind], after) => {
        const text = `${before}${value}${after}`;
        expect(findPii(text)).toEqual([{ kind, start: before.length, end: before.length + value.length }]);
      }),
      { numRuns: 300 },
    );
  });
});

describe('findPii: adversarial input stays linear', () => {
  const N = 200_000;
  const fill = (unit: string): string => unit.repeat(Math.ceil(N / unit.length)).slice(0, N);
  const cases: Array<[string, string]> = [
    ['a', fill('a')],
    ['digits', fill('1')],
    ['digit-space', fill('1 ')],
    ['digit-dash', fill('1-')],
    ['digit-dot', fill('1.')],
    ['at', fill('@')],
    ['a@', fill('a@')],
    ['a.', fill('a.')],
    ['a@b.', fill('a@b.')],
    ['long local part', fill('x') + '@example.com'],
    ['long domain', 'a@' + fill('b.')],
    ['eyJ a.', 'eyJ' + fill('a.')],
    ['eyJ', fill('eyJ')],
    ['eyJ segments', fill('eyJaaaaaaaaa.')],
    ['plus', '+' + fill('1')],
    ['plus-one', fill('+1 ')],
    ['parens', fill('(0')],
    ['zeros', fill('0 ')],
    ['PEM headers', fill('-----BEGIN PRIVATE KEY-----')],
    ['PEM unterminated', '-----BEGIN PRIVATE KEY-----\n' + fill('A')],
    ['PEM no END', fill('-----BEGIN PRIVATE KEY-----\nAAAAAAAAAAAAAAAAAAAA\n-----')],
    ['dashes', fill('-')],
    ['bearer', fill('Bearer ')],
    ['bearer long', 'Bearer ' + fill('a1')],
    ['sk-', fill('sk-')],
    ['AKIA', fill('AKIA')],
    ['IBAN heads', fill('DE89 ')],
    ['IBAN heads tight', fill('DE89')],
    ['labels', fill('call ')],
    ['label digits', 'tel: ' + fill('1 ')],
    ['assignments', fill('token=')],
    ['identifier', fill('a_')],
    ['ssn label', fill('ssn 1')],
    ['mixed punctuation', fill('a1-@.+ ()')],
    ['astral', fill('é😀')],
    ['cjk', fill('电话1')],
    ['base64', fill('AAAA/+==')],
  ];

  it.each(cases)('%s', (_name, text) => {
    const t0 = performance.now();
    findPii(text);
    applyPiiPolicy(text, 'redact');
    expect(performance.now() - t0).toBeLessThan(2000);
  });

  it('256 KiB of dense real PII is handled quickly and completely', () => {
    const unit = `a@b.io +1 415 555 0100 4111111111111111 123-45-6789 ${JWT} `;
    const text = unit.repeat(Math.floor(262_144 / unit.length));
    const t0 = performance.now();
    const out = applyPiiPolicy(text, 'redact');
    expect(performance.now() - t0).toBeLessThan(2000);
    const n = Math.floor(262_144 / unit.length);
    expect(out.found).toEqual([
      { kind: 'EMAIL', count: n },
      { kind: 'JWT', count: n },
      { kind: 'PAYMENT_CARD', count: n },
      { kind: 'PHONE', count: n },
      { kind: 'SSN', count: n },
    ]);
  });
});

describe('applyPiiPolicy', () => {
  const text = `Mail bob@example.com or alice@example.org, card 4111 1111 1111 1111, key ${GHP}.`;

  it('off: content unchanged, nothing found', () => {
    expect(applyPiiPolicy(text, 'off')).toEqual({ content: text, found: [] });
  });

  it('redact: replaces each match with its marker and counts kinds, sorted by kind', () => {
    expect(applyPiiPolicy(text, 'redact')).toEqual({
      content: 'Mail [REDACTED:EMAIL] or [REDACTED:EMAIL], card [REDACTED:PAYMENT_CARD], key [REDACTED:API_KEY].',
      found: [
        { kind: 'API_KEY', count: 1 },
        { kind: 'EMAIL', count: 2 },
        { kind: 'PAYMENT_CARD', count: 1 },
      ],
    });
  });

  it('reject: content unchanged, kinds listed', () => {
    const out = applyPiiPolicy(text, 'reject');
    expect(out.content).toBe(text);
    expect(out.found.map((f) => f.kind)).toEqual(['API_KEY', 'EMAIL', 'PAYMENT_CARD']);
  });

  it('clean content passes every mode untouched', () => {
    for (const mode of ['off', 'redact', 'reject'] as const) {
      expect(applyPiiPolicy('see you at 10:30, build 1.2.3', mode)).toEqual({
        content: 'see you at 10:30, build 1.2.3',
        found: [],
      });
    }
  });

  it('empty content', () => {
    expect(applyPiiPolicy('', 'redact')).toEqual({ content: '', found: [] });
  });

  it('bearer redaction keeps the scheme word', () => {
    expect(applyPiiPolicy('Authorization: Bearer abcDEF0123456789ghiJKL', 'redact').content).toBe(
      'Authorization: Bearer [REDACTED:BEARER_TOKEN]',
    );
  });

  it('marker format', () => {
    expect(redactionMarker('IBAN')).toBe('[REDACTED:IBAN]');
  });

  it('rejects an unknown mode instead of passing content through', () => {
    expect(() => applyPiiPolicy('a@b.io', 'bogus' as PiiMode)).toThrow(TypeError);
  });

  it('redacted output equals splicing markers at the reported matches', () => {
    const sample = `x ${PEM_RSA} y +44 20 7946 0958 z DE89 3704 0044 0532 0130 00`;
    const ms: PiiMatch[] = findPii(sample);
    let expected = sample;
    for (const m of [...ms].reverse()) {
      expected = expected.slice(0, m.start) + redactionMarker(m.kind) + expected.slice(m.end);
    }
    expect(applyPiiPolicy(sample, 'redact').content).toBe(expected);
    expect(expected).toBe('x [REDACTED:PRIVATE_KEY] y [REDACTED:PHONE] z [REDACTED:IBAN]');
  });
});
