// IP addresses and the common API-key shapes of issue 22 (finding 7): the default `redact`
// policy let an IPv4 address and an `sk-…` key through. IPv4 and IPv6 are now `IP_ADDRESS`;
// `sk-` keys written in one letter case (`sk-ant-api03-…`, lowercase hex) are `API_KEY`. The
// prefilter guarantees of docs/pii.md hold for the new detectors: the IPv4 detector needs a
// digit, the IPv6 detector "::" or hex:hex; property tests check that no detector matches
// where its trigger is absent, that findPii equals findPiiFull, that redaction is idempotent,
// and adversarial 200 KiB inputs stay linear.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { findPii, findPiiFull, mayContainPii, traceDetectors } from '../../src/daemon/pii/pii-detectors.js';
import type { PiiKind } from '../../src/daemon/pii/pii-detectors.js';
import { applyPiiPolicy } from '../../src/daemon/pii/pii-policy.js';

function show(text: string): string[] {
  return findPii(text).map((m) => `${m.kind}:${text.slice(m.start, m.end)}`);
}

describe('IP addresses', () => {
  it.each([
    ['server at 192.168.1.20 is down', '192.168.1.20'],
    ['ssh 10.0.0.5:2222', '10.0.0.5'],
    ['(8.8.8.8)', '8.8.8.8'],
    ['route 172.16.254.1/24.', '172.16.254.1'],
    ['end of sentence 203.0.113.7.', '203.0.113.7'],
    ['255.255.255.0', '255.255.255.0'],
    ['IPv6 2001:db8:85a3::8a2e:370:7334 here', '2001:db8:85a3::8a2e:370:7334'],
    ['full 2001:0db8:0000:0000:0000:ff00:0042:8329', '2001:0db8:0000:0000:0000:ff00:0042:8329'],
    ['link-local fe80::1%eth0', 'fe80::1'],
    ['[2001:db8::1]:443', '2001:db8::1'],
    ['mapped ::ffff:192.0.2.128', '::ffff:192.0.2.128'],
    ['upper case FE80::ABCD:1', 'FE80::ABCD:1'],
    ['prefix 2001:db8::', '2001:db8::'],
  ])('%s', (text, value) => {
    expect(show(text)).toEqual([`IP_ADDRESS:${value}`]);
  });

  it('host lines that an earlier test called near misses are addresses now', () => {
    expect(show('host 192.168.100.200 and 10.0.0.1, port 8080')).toEqual(['IP_ADDRESS:192.168.100.200', 'IP_ADDRESS:10.0.0.1']);
  });

  it('a range of two addresses is two matches', () => {
    expect(show('10.0.0.1-10.0.0.9')).toEqual(['IP_ADDRESS:10.0.0.1', 'IP_ADDRESS:10.0.0.9']);
  });

  it.each([
    'version 1.2.3.4.5',
    'version 1.2.3.4 and Version: 10.0.0.1',
    'v1.2.3.4',
    '256.1.1.1',
    '1.2.3',
    '01.02.03.04',
    '999.999.999.999',
    'loopback 127.0.0.1:3000',
    'listen 0.0.0.0',
    'broadcast 255.255.255.255',
    '::1 and ::',
    'std::vector<int> and Foo::Bar and a::b',
    'at 12:30:45 today',
    'MAC 00:1A:2B:3C:4D:5E',
    'ratio 1:2:3',
    'Note: see the docs',
  ])('not an address: %s', (text) => {
    expect(findPii(text).filter((m) => m.kind === 'IP_ADDRESS')).toEqual([]);
  });

  it('an address inside a longer dotted number is not read from its tail', () => {
    expect(show('oid 1.3.6.1.4.1.343')).toEqual([]);
  });
});

describe('API-key shapes', () => {
  it.each([
    ['OpenAI, lowercase hex', 'sk-' + '0123456789abcdef'.repeat(3)],
    ['OpenAI project key', 'sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z'],
    ['Anthropic', 'sk-ant-api03-' + 'abcdefghij0123456789'.repeat(4) + '-_abcdefAA'],
    ['GitHub classic', 'ghp_' + 'R7xk2Qm9Lp4Vt8Zw1Ny6Hb3Jc5Df0Gs2Ae4K'],
    ['GitHub fine-grained', 'github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789abcdefghijklmnopq'],
    ['Slack bot', 'xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx'],
    ['Slack user', 'xoxp-123456789012-123456789012-123456789012-0123456789abcdef0123456789abcdef'],
    ['Slack app', 'xoxa-2-123456789012-abcdefabcdef'],
    ['Slack refresh', 'xoxr-123456789012-abcdefabcdef'],
    ['Slack legacy', 'xoxo-123456789012-abcdefabcdef'],
    ['Slack config', 'xoxs-123456789012-abcdefabcdef'],
    ['AWS', 'AKIAIOSFODNN7EXAMPLE'],
  ])('%s', (_name, key) => {
    expect(show(`the key is ${key} ok`)).toEqual([`API_KEY:${key}`]);
  });

  it('kebab-case words after sk- are still not keys', () => {
    expect(show('pip install sk-learn-extension-tools-for-everyone')).toEqual([]);
    expect(show('the sk-learn-1-2-3-4-5-6-7-8-9 tutorial')).toEqual([]);
  });
});

describe('the default policy on the message of the issue', () => {
  it('redacts the IPv4 address and the sk- key along with the e-mail and phone', () => {
    const key = 'sk-' + '9f8e7d6c5b4a3210'.repeat(3);
    const text = `mail me at ops@example.com or +1 415 555 0100; the box is 203.0.113.42 and the key ${key}`;
    const out = applyPiiPolicy(text, 'redact');
    expect(out.content).toBe(
      'mail me at [REDACTED:EMAIL] or [REDACTED:PHONE]; the box is [REDACTED:IP_ADDRESS] and the key [REDACTED:API_KEY]',
    );
    expect(out.found).toEqual([
      { kind: 'API_KEY', count: 1 },
      { kind: 'EMAIL', count: 1 },
      { kind: 'IP_ADDRESS', count: 1 },
      { kind: 'PHONE', count: 1 },
    ]);
  });
});

// ---------------------------------------------------------------------------------------------
// Properties, with fragments that build addresses, near misses and their neighbours.

const HEX = '0123456789abcdefABCDEF';
const octet = fc.integer({ min: 0, max: 255 }).map(String);
const ipv4 = fc.tuple(octet, octet, octet, octet).map((o) => o.join('.'));
const group = fc.string({ unit: fc.constantFrom(...HEX.split('')), minLength: 1, maxLength: 4 });
const ipv6Full = fc.array(group, { minLength: 8, maxLength: 8 }).map((g) => g.join(':'));
const ipv6Compressed = fc
  .tuple(fc.array(group, { minLength: 0, maxLength: 3 }), fc.array(group, { minLength: 0, maxLength: 3 }))
  .map(([a, b]) => `${a.join(':')}::${b.join(':')}`);
const fragment = fc.oneof(
  ipv4,
  ipv6Full,
  ipv6Compressed,
  ipv4.map((v4) => `::ffff:${v4}`),
  fc.string({ unit: fc.constantFrom(...'0123456789.:abcdefx '.split('')), maxLength: 12 }),
  fc.constantFrom(' ', '.', ':', '::', '-', '/', '[', ']', '%', '+', 'v', '\n', 'é', '😀', '@', 'a@b.io', '+1 415 555 0100', 'sk-'),
);
const mixed = fc.array(fragment, { maxLength: 30 }).map((parts) => parts.join(''));

/** The IPV6 trigger, stripped to a fixpoint: what is left must not hold an IPv6 candidate. */
function stripIpv6Trigger(text: string): string {
  let s = text;
  for (let prev = ''; prev !== s;) {
    prev = s;
    s = s.replace(/::|[0-9A-Fa-f]:[0-9A-Fa-f]/g, ':');
  }
  return s;
}

describe('IP detectors keep the prefilter guarantees', () => {
  it('findPii equals findPiiFull, and redaction is idempotent (3,000 runs)', () => {
    fc.assert(
      fc.property(mixed, (text) => {
        expect(findPii(text)).toEqual(findPiiFull(text));
        const once = applyPiiPolicy(text, 'redact');
        const twice = applyPiiPolicy(once.content, 'redact');
        expect(twice.content).toBe(once.content);
        expect(twice.found).toEqual([]);
      }),
      { numRuns: 3_000 },
    );
  });

  it('no detector matches where its trigger is absent, on text stripped of the IPv6 trigger or of digits (3,000 runs)', () => {
    fc.assert(
      fc.property(mixed, (text) => {
        for (const t of [stripIpv6Trigger(text), text.replace(/[0-9]/g, ''), stripIpv6Trigger(text.replace(/[0-9]/g, ''))]) {
          const leaks = traceDetectors(t).filter((d) => !d.triggered && d.candidates > 0);
          expect(leaks, t).toEqual([]);
          if (!mayContainPii(t)) expect(findPiiFull(t)).toEqual([]);
        }
      }),
      { numRuns: 3_000 },
    );
  });

  it('a real address is found whatever non-address context surrounds it', () => {
    const ctx = fc.string({ unit: fc.constantFrom(' ', '\n', '(', ')', '[', ']', '"', ',', ';', '<', '>', '😀', 'é'), maxLength: 5 });
    const value = fc.oneof(
      ipv4.filter((v) => !v.startsWith('127.') && v !== '0.0.0.0' && v !== '255.255.255.255'),
      ipv6Full,
    );
    fc.assert(
      fc.property(ctx, value, ctx, (before, v, after) => {
        const kinds: PiiKind[] = findPii(`${before}${v}${after}`).map((m) => m.kind);
        expect(kinds).toEqual(['IP_ADDRESS']);
      }),
      { numRuns: 1_000 },
    );
  });
});

describe('IP detectors stay linear on adversarial input', () => {
  const N = 200_000;
  const fill = (unit: string): string => unit.repeat(Math.ceil(N / unit.length)).slice(0, N);
  it.each([
    ['digit-dot', fill('1.')],
    ['octets', fill('255.')],
    ['dotted quads', fill('1.2.3.4.')],
    ['colons', fill(':')],
    ['double colons', fill('::')],
    ['hex-colon', fill('f:')],
    ['groups', fill('ffff:')],
    ['mapped tails', fill('::ffff:1.2.3.')],
    ['hex run', fill('abcdef0123')],
    // Dense real addresses, as dense as the 256 KiB mixed-PII case of pii.test.ts (one per ~20 chars).
    ['addresses', fill('at 10.0.0.1, then fe80::1 or so; ')],
  ])('%s', (_name, text) => {
    const t0 = performance.now();
    findPii(text);
    applyPiiPolicy(text, 'redact');
    expect(performance.now() - t0).toBeLessThan(2000);
  });
});
