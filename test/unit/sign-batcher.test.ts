// Adaptive signing: every signature verifies whichever path made it (at once, or at the end of
// a busy turn), a busy turn is deferred and signed in order, and close() signs what waits.

import { createPublicKey, verify } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SignBatcher } from '../../src/daemon/crypto/sign-batcher.js';
import { Signer } from '../../src/daemon/crypto/signer.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup() {
  const dir = mkdtempSync(path.join(tmpdir(), 'yl-sign-'));
  dirs.push(dir);
  const signer = new Signer(path.join(dir, 'keys'));
  const batcher = new SignBatcher(signer);
  const jwk = signer.jwks().keys[0]!;
  const key = createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, format: 'jwk' });
  const ok = (payload: string, value: string) =>
    verify('sha256', Buffer.from(payload), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(value, 'base64url'));
  return { signer, batcher, ok };
}

describe('SignBatcher', () => {
  it('signs at once while the load is low', () => {
    const { signer, batcher, ok } = setup();
    const v = batcher.sign(signer.kid, 'one');
    expect(typeof v).toBe('string');
    expect(ok('one', v as string)).toBe(true);
    expect(batcher.stats).toEqual({ immediate: 1, deferred: 0 });
  });

  it('defers a busy turn to its end; every signature verifies, in order', async () => {
    const { signer, batcher, ok } = setup();
    const payloads = Array.from({ length: 40 }, (_, i) => `payload ${i}`);
    // Two busy turns: the second sees the first was busy and defers from its first request.
    for (let turn = 0; turn < 2; turn++) {
      // sign() answers a string when it signs at once; Promise.resolve makes each one a promise.
      const values = await Promise.all(payloads.map((p) => Promise.resolve(batcher.sign(signer.kid, p))));
      values.forEach((v, i) => {
        expect(ok(payloads[i]!, v), `payload ${i}`).toBe(true);
      });
      await new Promise((r) => setImmediate(r));
    }
    // The first turn's first requests are signed at once, all of the second turn's deferred.
    expect(batcher.stats.deferred).toBeGreaterThanOrEqual(40 + 37);
    expect(batcher.stats.immediate + batcher.stats.deferred).toBe(80);
  });

  it('close() signs what is still waiting', async () => {
    const { signer, batcher, ok } = setup();
    const pending = Array.from({ length: 10 }, (_, i) => batcher.sign(signer.kid, `p${i}`));
    batcher.close();
    const values = await Promise.all(pending.map((v) => Promise.resolve(v)));
    values.forEach((v, i) => {
      expect(ok(`p${i}`, v)).toBe(true);
    });
  });
});
