/**
 * Outbound PII policy (docs/protocol.md §7): applied to `chat.message` content before it is hashed
 * and signed, so the signature always covers the text after the policy.
 */
import { findPii, findPiiFull } from './pii-detectors.js';
import type { PiiKind } from './pii-detectors.js';
import type { PiiMode } from '../../shared/types.js';
import { byCodeUnits } from '../../shared/text-order.js';

export type { PiiKind, PiiMatch } from './pii-detectors.js';

export type { PiiMode } from '../../shared/types.js';

/**
 * Result of applying a policy. `found` holds one entry per detected kind, sorted by kind
 * name, so callers can build `redactions` / `POLICY_REJECTED.kinds` deterministically.
 */
export interface PiiOutcome {
  content: string;
  found: Array<{ kind: PiiKind; count: number }>;
}

/** Options of `applyPiiPolicy`. */
export interface PiiPolicyOptions {
  /**
   * `false` runs every detector on every message (`findPiiFull`) instead of only those the
   * prefilter lets through. The result is the same; this exists for the equivalence tests
   * and the benchmark. Default `true`.
   */
  prefilter?: boolean;
}

/** The placeholder that replaces a match under `redact`, e.g. `[REDACTED:EMAIL]`. */
export function redactionMarker(kind: PiiKind): string {
  return `[REDACTED:${kind}]`;
}

/**
 * Applies `mode` to `text`.
 *
 * - `off`: content unchanged, nothing reported (detection does not even run).
 * - `redact`: every match replaced by `[REDACTED:<KIND>]`; `found` counts the replacements.
 * - `reject`: content unchanged; `found` lists what matched. The caller fails the append
 *   with `POLICY_REJECTED` when `found` is non-empty.
 *
 * Redaction is idempotent: markers contain nothing any detector matches, so applying the
 * policy to already-redacted content changes nothing.
 */
export function applyPiiPolicy(text: string, mode: PiiMode, options: PiiPolicyOptions = {}): PiiOutcome {
  switch (mode) {
    case 'off':
      return { content: text, found: [] };
    case 'redact':
    case 'reject': {
      const matches = options.prefilter === false ? findPiiFull(text) : findPii(text);
      const counts = new Map<PiiKind, number>();
      for (const m of matches) counts.set(m.kind, (counts.get(m.kind) ?? 0) + 1);
      // The result feeds signed and hashed data: an order that no locale changes.
      const found = [...counts.entries()].sort(([a], [b]) => byCodeUnits(a, b)).map(([kind, count]) => ({ kind, count }));
      if (mode === 'reject' || matches.length === 0) return { content: text, found };
      const parts: string[] = [];
      let pos = 0;
      for (const m of matches) {
        parts.push(text.slice(pos, m.start), redactionMarker(m.kind));
        pos = m.end;
      }
      parts.push(text.slice(pos));
      return { content: parts.join(''), found };
    }
    default: {
      // Unreachable for typed callers; a policy value read from storage could still be bad,
      // and silently sending unfiltered content would be the wrong failure.
      const bad: never = mode;
      throw new TypeError(`unknown PII mode: ${String(bad)}`);
    }
  }
}
