// The Host check of the --metrics-listen endpoint (issue 52, finding 2: it answered any Host, so
// a DNS-rebound name could read the scrape). src/daemon/runtime/metrics-host.ts.
import { describe, expect, it } from 'vitest';
import { metricsHostAllowed } from '../../src/daemon/runtime/metrics-host.js';

describe('metricsHostAllowed', () => {
  it('on a loopback bind: localhost and loopback addresses on the port, and the bound address', () => {
    const bound = { address: '127.0.0.1', port: 9464 };
    for (const h of ['127.0.0.1:9464', 'localhost:9464', 'LocalHost:9464', '[::1]:9464', '127.0.0.2:9464'])
      expect(metricsHostAllowed(h, bound), h).toBe(true);
    for (const h of [
      undefined,
      '',
      'evil.example:9464',
      'localhost',
      '127.0.0.1:9465',
      '10.1.2.3:9464',
      'localhost.evil.example:9464',
      '[::1]',
      'a:b:c',
    ])
      expect(metricsHostAllowed(h, bound), String(h)).toBe(false);
  });

  it('on a wildcard bind (--metrics-allow-remote 0.0.0.0 or ::): any IP address on the port, never a name but localhost', () => {
    for (const address of ['0.0.0.0', '::']) {
      const bound = { address, port: 80 };
      for (const h of ['10.1.2.3', '10.1.2.3:80', '[fe80::1]:80', 'localhost']) expect(metricsHostAllowed(h, bound), h).toBe(true);
      for (const h of ['yello-host', 'yello-host:80', '10.1.2.3:81']) expect(metricsHostAllowed(h, bound), h).toBe(false);
    }
  });

  it('on a specific address: that address (IPv4-mapped forms too) and loopback, not another address', () => {
    const bound = { address: '10.1.2.3', port: 9464 };
    expect(metricsHostAllowed('10.1.2.3:9464', bound)).toBe(true);
    expect(metricsHostAllowed('[::ffff:10.1.2.3]:9464', bound)).toBe(true);
    expect(metricsHostAllowed('10.1.2.4:9464', bound)).toBe(false);
  });
});
