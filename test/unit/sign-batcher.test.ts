// Adaptive signing: every signature verifies whichever path made it (inline now, inline at the
// end of the turn, or the worker), the worker is used only under load, and a worker that dies
// never leaves a write waiting: what it held is signed inline.

import { createPublicKey, verify } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { SignBatcher } from '../../src/daemon/crypto/sign-batcher.js';
import { Signer } from '../../src/daemon/crypto/signer.js';
import { silentLog } from '../helpers/in-process-store.js';

const dirs: string[] = [];
const batchers: SignBatcher[] = [];
afterEach(async () => {
  for (const b of batchers.splice(0)) await b.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup(options: ConstructorParameters<typeof SignBatcher>[2] = {}) {
  const dir = mkdtempSync(path.join(tmpdir(), 'yl-sign-'));
  dirs.push(dir);
  const signer = new Signer(path.join(dir, 'keys'));
  // The built worker: vitest runs the TS sources, the worker thread needs JavaScript.
  const batcher = new SignBatcher(signer, silentLog, {
    workerUrl: pathToFileURL(path.resolve('dist/daemon/crypto/sign-worker.js')),
    ...options,
  });
  batchers.push(batcher);
  const jwk = signer.jwks().keys[0]!;
  const key = createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, format: 'jwk' });
  const ok = (payload: string, value: string) =>
    verify('sha256', Buffer.from(payload), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(value, 'base64url'));
  return { signer, batcher, ok, dir };
}

describe('SignBatcher', () => {
  it('signs at once while the load is low', () => {
    const { signer, batcher, ok } = setup();
    const v = batcher.sign(signer.kid, 'one');
    expect(typeof v).toBe('string');
    expect(ok('one', v as string)).toBe(true);
  });

  it('defers a busy turn and hands it to the worker; every signature verifies, in order', async () => {
    const { signer, batcher, ok } = setup();
    const payloads = Array.from({ length: 40 }, (_, i) => `payload ${i}`);
    // Two busy turns: the second sees the first was busy and defers from its first request.
    for (let turn = 0; turn < 2; turn++) {
      // sign() answers a string when it signs inline; Promise.resolve makes each one a promise.
      const values = await Promise.all(payloads.map((p) => Promise.resolve(batcher.sign(signer.kid, p))));
      values.forEach((v, i) => {
        expect(ok(payloads[i]!, v), `payload ${i}`).toBe(true);
      });
      await new Promise((r) => setImmediate(r));
    }
    expect(batcher.stats.workerSignatures).toBeGreaterThanOrEqual(40);
    expect(batcher.stats.inlineSignatures).toBeLessThan(40);
  });

  it('signs inline what a dying worker held, and everything after', async () => {
    const { signer, ok, dir } = setup();
    const dying = path.join(dir, 'dying-worker.mjs');
    writeFileSync(
      dying,
      "import { parentPort } from 'node:worker_threads'; parentPort.on('message', (m) => { if (m.type === 'sign') process.exit(3); });",
    );
    const fragile = new SignBatcher(signer, silentLog, { workerUrl: pathToFileURL(dying) });
    batchers.push(fragile);
    const payloads = Array.from({ length: 20 }, (_, i) => `p${i}`);
    const values = await Promise.all(payloads.map((p) => Promise.resolve(fragile.sign(signer.kid, p))));
    values.forEach((v, i) => {
      expect(ok(payloads[i]!, v)).toBe(true);
    });
    expect(fragile.stats.workerSignatures).toBe(0);
    const after = await Promise.all(payloads.map((p) => Promise.resolve(fragile.sign(signer.kid, p))));
    after.forEach((v, i) => {
      expect(ok(payloads[i]!, v)).toBe(true);
    });
  });
});
