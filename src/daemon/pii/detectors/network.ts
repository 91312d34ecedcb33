// Network addresses: IPv4 and IPv6.
import { isIPv6 } from 'node:net';
import { RANK, re, scan, add, type Candidate } from './common.js';

// ---------------------------------------------------------------------------------------------
// IPv4: four dotted decimal octets (0–255, no leading zeros). Bounded (at most 15 characters),
// so each start costs O(1). An address never starts inside a word, after `+` (a phone) or
// after a digit and a dot (the tail of a longer dotted number), and never ends before a word
// character or a dot and a digit: "1.2.3.4.5" (an OID or a version) and "v1.2.3.4" are not
// addresses, and neither is a four-part number right after "version " ("version 1.2.3.4").
// Left and right mirror each other, so redacting a neighbour never flips a verdict.
// Addresses that identify no host (0.0.0.0, loopback 127.0.0.0/8, the broadcast
// 255.255.255.255) are claimed as nothing.
// Trigger DIGIT: every octet is `[0-9]`.
const OCTET = String.raw`(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])`;
const IPV4 = re(
  String.raw`(?<![\w+])(?<![0-9]\.)(?<![Vv]ersion:? )` + OCTET + String.raw`(?:\.` + OCTET + String.raw`){3}(?![\w])(?!\.[0-9])`,
  'g',
);

function identifiesNoHost(ip: string): boolean {
  return ip === '0.0.0.0' || ip === '255.255.255.255' || ip.startsWith('127.');
}

export function detectIpv4(text: string, out: Candidate[]): void {
  scan(IPV4, text, (m) => add(out, identifiesNoHost(m[0]) ? null : 'IP_ADDRESS', m.index, m.index + m[0].length, RANK.IP_ADDRESS));
}

// ---------------------------------------------------------------------------------------------
// IPv6: a run of hex digits and colons (at most 39 characters), optionally ending in a dotted
// IPv4 part after a colon ("::ffff:192.0.2.1"), that node:net's isIPv6 accepts. Bounded, so
// each start costs O(1); the boundaries are those of IPv4 with ':' added (a run never starts
// or ends in the middle of a longer hex-and-colon run). To spare code such as `A::B` or
// `dead::beef`-style identifiers as far as it can, a compressed form ("::") needs two groups,
// one of them of three or more hex digits or an IPv4 part: "fe80::1" and "2001:db8::" are
// addresses, "a::b" is not, and neither are "::" (unspecified) and "::1" (loopback), which
// identify no host. Times ("12:30:45") and MAC addresses (six groups) are not IPv6.
// Trigger IPV6: an accepted address either contains "::" or, written out in full, has two
// groups joined by one colon, i.e. a hex digit, ':' and a hex digit.
const IPV6 = re(
  String.raw`(?<![\w:])(?<![0-9]\.)[0-9A-Fa-f:]{2,39}(?:(?<=:)` +
    OCTET +
    String.raw`(?:\.` +
    OCTET +
    String.raw`){3})?(?![\w:])(?!\.[0-9])`,
  'g',
);

function isHostIpv6(s: string): boolean {
  if (!isIPv6(s)) return false;
  if (!s.includes('::')) return true;
  const groups = s.split(':').filter((g) => g !== '');
  return groups.length >= 2 && groups.some((g) => g.length >= 3 || g.includes('.'));
}

export function detectIpv6(text: string, out: Candidate[]): void {
  scan(IPV6, text, (m) => (isHostIpv6(m[0]) ? add(out, 'IP_ADDRESS', m.index, m.index + m[0].length, RANK.IP_ADDRESS) : false));
}
