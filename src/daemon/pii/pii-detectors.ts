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
 * This module runs the detectors: their list, the prefilter, overlap resolution and the
 * masked re-scan passes of `findPii`. The detectors are grouped by family in `detectors/`
 * (secrets, banking, ssn, contact), with what they share in `detectors/common.ts`.
 *
 * See docs/pii.md for what is detected, the disambiguation rules and the known limits.
 */

import { detectCards, detectIban } from './detectors/banking.js';
import type { Candidate, PiiMatch, PiiTrigger } from './detectors/common.js';
import { detectEmail, detectPhones } from './detectors/contact.js';
import { detectIpv4, detectIpv6 } from './detectors/network.js';
import { detectBearer, detectGenericSecrets, detectJwt, detectKeyShape, detectPem, KEY_SHAPES, SECRET_WORD } from './detectors/secrets.js';
import { detectSsn } from './detectors/ssn.js';

export type { PiiKind, PiiMatch, PiiTrigger } from './detectors/common.js';
export { ibanChecksumOk, luhnOk } from './detectors/banking.js';

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
  { name: 'IPV4', trigger: 'DIGIT', detect: detectIpv4 },
  { name: 'IPV6', trigger: 'IPV6', detect: detectIpv6 },
  { name: 'PHONE', trigger: 'DIGIT', detect: detectPhones },
];

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
//
// Flagless on purpose (see "Prefilter triggers"), so that they combine into one alternation.
const TRIGGERS: Readonly<Record<PiiTrigger, RegExp>> = {
  DIGIT: /[0-9]/,
  AT: /@/,
  PEM: /-----BEGIN /,
  JWT: /eyJ/,
  BEARER: /[Bb][Ee][Aa][Rr][Ee][Rr]/,
  IPV6: /::|[0-9A-Fa-f]:[0-9A-Fa-f]/,
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
 * API keys, bearer tokens, JWTs and IP addresses in `text`.
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
