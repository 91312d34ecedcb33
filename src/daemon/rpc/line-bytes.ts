/**
 * `line` and its newline as UTF-8 bytes, in a buffer of exactly that size. A string written to a
 * socket the peer does not drain is held by Node in a buffer sized for the worst case of its
 * encoding (3 bytes per UTF-16 unit): a 1 MB answer left unread held 3 MB. Unsent output is
 * then also counted in bytes, as the budgets mean it.
 */
export function lineBytes(line: string): Buffer {
  const n = Buffer.byteLength(line, 'utf8');
  const out = Buffer.allocUnsafe(n + 1);
  out.write(line, 0, 'utf8');
  out[n] = 0x0a;
  return out;
}
