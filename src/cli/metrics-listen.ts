import { isIP } from 'node:net';

/** Where `--metrics-listen` serves GET /metrics. */
export interface MetricsAddress {
  host: string;
  port: number;
}

/**
 * Parse `--metrics-listen HOST:PORT` (`[::1]:PORT` for IPv6; `localhost` is the only name taken,
 * so no DNS is consulted at start). A non-loopback address is refused unless `allowRemote`: the
 * endpoint has neither TLS nor authentication, so binding it beyond this host has to be asked
 * for by name. Returns the address, or the usage message.
 */
export function parseMetricsListen(text: string, allowRemote: boolean): MetricsAddress | string {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text);
  const host = m?.[1] ?? m?.[2];
  const port = Number(m?.[3]);
  if (!m || host === undefined || port > 65_535)
    return `--metrics-listen must be HOST:PORT (a port up to 65535), e.g. 127.0.0.1:9464 or [::1]:9464; got "${text}"`;
  if (host !== 'localhost' && isIP(host) === 0)
    return `--metrics-listen takes an IP address or localhost, not "${host}" (e.g. 127.0.0.1:${port})`;
  if (!allowRemote && !isLoopback(host))
    return `--metrics-listen ${text} is not a loopback address; metrics have no TLS or authentication: use 127.0.0.1:${port}, or add --metrics-allow-remote to serve them beyond this host`;
  return { host, port };
}

function isLoopback(host: string): boolean {
  if (host === 'localhost' || host === '::1') return true;
  const v4 = host.startsWith('::ffff:') ? host.slice('::ffff:'.length) : host;
  return isIP(v4) === 4 && v4.startsWith('127.');
}
