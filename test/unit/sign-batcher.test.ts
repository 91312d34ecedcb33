// Adaptive signing: every signature verifies whichever path made it (at once, at the end of a
// busy turn in libuv's thread pool, or in the sign pool's worker threads), a busy turn is
// deferred and signed in order, a failed worker leaves nothing waiting, and close() signs what
// waits.

import { createPublicKey, verify } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { SignBatcher } from '../../src/daemon/crypto/sign-batcher.js';
import { defaultSignWorkers, SignPool } from '../../src/daemon/crypto/sign-pool.js';
import { Signer } from '../../src/daemon/crypto/signer.js';
import { repoRoot } from '../helpers/daemon-process.js';

// The worker runs compiled JavaScript: the build's (npm test builds first).
const workerUrl = pathToFileURL(path.join(repoRoot, 'dist/daemon/crypto/sign-worker.js'));
const quiet = pino({ level: 'silent' });

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup(pool?: (signer: Signer) => SignPool) {
  const dir = mkdtempSync(path.join(tmpdir(), 'yl-sign-'));
  dirs.push(dir);
  const signer = new Signer(path.join(dir, 'keys'));
  const batcher = new SignBatcher(signer, { pool: pool?.(signer) ?? null });
  const jwk = signer.jwks().keys[0]!;
  const key = createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, format: 'jwk' });
  const ok = (payload: string, value: string) =>
    verify('sha256', Buffer.from(payload), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(value, 'base64url'));
  return { signer, batcher, ok, dir };
}

/** `n` payloads asked for in one turn: their values, settled. */
const oneTurn = (batcher: SignBatcher, kid: string, payloads: string[]) =>
  Promise.all(payloads.map((p) => Promise.resolve(batcher.sign(kid, p))));

describe('SignBatcher', () => {
  it('signs at once while the load is low', () => {
    const { signer, batcher, ok } = setup();
    const v = batcher.sign(signer.kid, 'one');
    expect(typeof v).toBe('string');
    expect(ok('one', v as string)).toBe(true);
    expect(batcher.stats).toEqual({ immediate: 1, deferred: 0, threadPool: 0 });
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
    // Without a worker pool, every deferred signature was made in libuv's thread pool.
    expect(batcher.stats.threadPool).toBe(batcher.stats.deferred);
  });

  it("a busy turn's signatures are made off the event loop: none is ready when the turn's end has passed", async () => {
    const { signer, batcher, ok } = setup();
    await oneTurn(batcher, signer.kid, ['warm 1', 'warm 2', 'warm 3', 'warm 4']);
    const payloads = Array.from({ length: 20 }, (_, i) => `busy ${i}`);
    let made = 0;
    const values = payloads.map((p) =>
      Promise.resolve(batcher.sign(signer.kid, p)).then((v) => {
        made++;
        return v;
      }),
    );
    // Queued after the batcher's end-of-turn callback, so it runs right after it. Signed there on
    // the event loop, every value would be ready by now; from libuv's pool, answers only come
    // in a later poll phase of the loop.
    const afterTurnEnd = new Promise<number>((r) => {
      setImmediate(() => {
        r(made);
      });
    });
    expect(await afterTurnEnd).toBe(0);
    const signed = await Promise.all(values);
    signed.forEach((v, i) => {
      expect(ok(payloads[i]!, v), `payload ${i}`).toBe(true);
    });
  });

  it('close() signs what is still waiting', async () => {
    const { signer, batcher, ok } = setup();
    const pending = Array.from({ length: 10 }, (_, i) => batcher.sign(signer.kid, `p${i}`));
    await batcher.close();
    const values = await Promise.all(pending.map((v) => Promise.resolve(v)));
    values.forEach((v, i) => {
      expect(ok(`p${i}`, v)).toBe(true);
    });
  });
});

describe('SignPool: busy turns signed in worker threads', () => {
  it('the default size: one worker per core beyond two, at most 4', () => {
    expect([1, 2, 3, 4, 6, 64].map((cores) => defaultSignWorkers(cores))).toEqual([0, 0, 1, 2, 4, 4]);
  });

  it("a busy turn's signatures come from the workers, split between them, and each verifies over its own payload", async () => {
    let pool!: SignPool;
    const { signer, batcher, ok } = setup((s) => (pool = new SignPool(s, quiet, 2, workerUrl)));
    const payloads = Array.from({ length: 40 }, (_, i) => `payload ${i}`);
    const values = await oneTurn(batcher, signer.kid, payloads);
    values.forEach((v, i) => {
      expect(ok(payloads[i]!, v), `payload ${i}`).toBe(true);
    });
    // The first three of the turn at once, the other 37 in one batch per worker.
    expect(batcher.stats).toEqual({ immediate: 3, deferred: 37, threadPool: 0 });
    expect(pool.stats).toEqual({ batches: 2, signatures: 37 });
    await batcher.close();
  });

  it('a worker that dies: what it held is signed on the event loop, and so is everything after', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'yl-sign-bad-'));
    dirs.push(dir);
    const dying = path.join(dir, 'dying-worker.mjs');
    writeFileSync(
      dying,
      "import { parentPort } from 'node:worker_threads';\nparentPort.on('message', (m) => { if (m.type === 'sign') process.exit(3); });\n",
    );
    let pool!: SignPool;
    const { signer, batcher, ok } = setup((s) => (pool = new SignPool(s, quiet, 1, pathToFileURL(dying))));
    const payloads = Array.from({ length: 12 }, (_, i) => `q${i}`);
    const values = await oneTurn(batcher, signer.kid, payloads);
    values.forEach((v, i) => {
      expect(ok(payloads[i]!, v), `payload ${i}`).toBe(true);
    });
    expect(pool.usable).toBe(false);
    expect(pool.stats.signatures).toBe(0);
    await new Promise((r) => setImmediate(r));
    const later = await oneTurn(batcher, signer.kid, payloads);
    later.forEach((v, i) => {
      expect(ok(payloads[i]!, v)).toBe(true);
    });
    await batcher.close();
  });

  it('close() signs on the event loop what a worker still holds', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'yl-sign-mute-'));
    dirs.push(dir);
    // A worker that never answers: only close() can settle its jobs.
    const mute = path.join(dir, 'mute-worker.mjs');
    writeFileSync(mute, "import { parentPort } from 'node:worker_threads';\nparentPort.on('message', () => {});\n");
    const { signer, batcher, ok } = setup((s) => new SignPool(s, quiet, 1, pathToFileURL(mute)));
    const pending = Array.from({ length: 8 }, (_, i) => Promise.resolve(batcher.sign(signer.kid, `c${i}`)));
    await new Promise((r) => setImmediate(r));
    await batcher.close();
    const values = await Promise.all(pending);
    values.forEach((v, i) => {
      expect(ok(`c${i}`, v)).toBe(true);
    });
  });
});
