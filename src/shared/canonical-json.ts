/**
 * Canonical JSON (docs/protocol.md §5.9): the one byte form of a JSON value that the daemon
 * hashes into a checkpoint and every verifier recomputes from the parsed value, whatever
 * spacing or escaping the line it came from used. It is the RFC 8785 (JCS) serialization for
 * the values records hold (strings, small integers, booleans, null, arrays, objects): object
 * members sorted by name in UTF-16 code unit order, no whitespace, strings escaped as
 * `JSON.stringify` does. Members whose value is `undefined` are left out, as in JSON.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError('canonical JSON has no form for a non-finite number');
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map((v: unknown) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  if (typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    // Default sort compares UTF-16 code units, which is what JCS asks for.
    const names = Object.keys(obj)
      .filter((k) => obj[k] !== undefined)
      .sort();
    return `{${names.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(',')}}`;
  }
  throw new TypeError(`canonical JSON has no form for a ${typeof value}`);
}
