import { isIP } from 'node:net';

/**
 * Whether a `Host` header names the `--metrics-listen` endpoint as this host knows it, not a
 * name a DNS-rebinding page made resolve here (`evil.example:9464` → 127.0.0.1: the browser would
 * let that page read the scrape). As the console does (src/console/guard.ts): `localhost` and
 * the loopback addresses on the bound port, and the bound address itself. An endpoint bound to a
 * wildcard (`0.0.0.0`, `::`, with `--metrics-allow-remote`) answers any IP address on its port:
 * a rebinding attack needs a name, and a remote Prometheus scrapes by address. Names other than
 * `localhost` are refused (scrape by address, or through a reverse proxy that sets `Host`).
 */
export function metricsHostAllowed(host: string | undefined, bound: { address: string; port: number }): boolean {
  if (host === undefined) return false;
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/.exec(host.trim().toLowerCase());
  if (!m) return false;
  const name = m[1] ?? m[2] ?? '';
  const port = m[3] === undefined ? 80 : Number(m[3]);
  if (port !== bound.port) return false;
  if (name === 'localhost' || isLoopback(name)) return true;
  if (isIP(name) === 0) return false;
  const wildcard = bound.address === '0.0.0.0' || bound.address === '::';
  return wildcard || sameAddress(name, bound.address);
}

function isLoopback(address: string): boolean {
  if (address === '::1') return true;
  const v4 = address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
  return isIP(v4) === 4 && v4.startsWith('127.');
}

function sameAddress(a: string, b: string): boolean {
  const strip = (x: string) => (x.startsWith('::ffff:') && isIP(x.slice(7)) === 4 ? x.slice(7) : x);
  return strip(a) === strip(b.toLowerCase());
}
