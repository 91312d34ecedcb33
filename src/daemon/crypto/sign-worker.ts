// A signing worker: a worker_threads entry point of the sign pool (sign-pool.ts). It receives
// private JWKs (before the first batch that uses each) and batches of payloads, and answers each
// batch with its ES256 signatures (IEEE P1363, base64url) in order. No other state, no I/O.
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { parentPort } from 'node:worker_threads';
import { signPayload } from './signer.js';

/** Messages the main thread sends. */
export type ToWorker =
  | { type: 'key'; kid: string; privateJwk: { kty: 'EC'; crv: 'P-256'; x: string; y: string; d: string } }
  | { type: 'sign'; id: number; jobs: Array<[kid: string, payload: string]> };

/** The worker's answer to a `sign` batch. */
export interface FromWorker {
  id: number;
  signatures: string[];
}

const keys = new Map<string, KeyObject>();

/** A key the main thread sent; it sends each key before the first batch that uses it. */
function keyOf(kid: string): KeyObject {
  const key = keys.get(kid);
  if (!key) throw new Error(`signing worker: no key ${kid}`);
  return key;
}

const port = parentPort;
port?.on('message', (m: ToWorker) => {
  if (m.type === 'key') {
    keys.set(m.kid, createPrivateKey({ key: m.privateJwk, format: 'jwk' }));
    return;
  }
  const signatures = m.jobs.map(([kid, payload]) => signPayload(keyOf(kid), payload));
  port.postMessage({ id: m.id, signatures } satisfies FromWorker);
});
