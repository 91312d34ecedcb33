import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { checkpointPayload, type CheckpointFields } from '../../shared/checkpoint.js';
import { messagePayload, type SignedFields } from '../../shared/message-signing.js';
import type { CheckpointSignature, Jwks, MessageSignature, PublicJwk } from '../../shared/types.js';
import { ensureDir, writeFileDurable } from '../runtime/files.js';
import { byCodeUnits } from '../../shared/text-order.js';

interface StoredKey {
  kid: string;
  createdAt: string;
  privateJwk: { kty: 'EC'; crv: 'P-256'; x: string; y: string; d: string };
}

/** RFC 7638 thumbprint of a P-256 public key: SHA-256 over the required members in order. */
export function jwkThumbprint(jwk: { crv: string; kty: string; x: string; y: string }): string {
  const input = JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y });
  return createHash('sha256').update(input, 'utf8').digest('base64url');
}

/**
 * A message signature as found on disk: `alg` is a plain string because a stored record is
 * checked, not trusted, and one naming another algorithm must fail the check.
 */
export type StoredSignature = Omit<MessageSignature, 'alg'> & { alg: string };

/** ES256 over the §5 payload, IEEE P1363 (r‖s), base64url. */
export function signPayload(key: KeyObject, payload: string): string {
  return sign('sha256', Buffer.from(payload, 'utf8'), { key, dsaEncoding: 'ieee-p1363' }).toString('base64url');
}

/**
 * The daemon's signing keys in `<data-dir>/keys` (dir 0700, files 0600). One key is active;
 * rotated-out keys stay on disk and in the JWKS so old signatures keep verifying.
 */
export class Signer {
  readonly #dir: string;
  #keys = new Map<string, StoredKey>();
  #activeKid = '';
  #activeKey!: KeyObject;
  readonly #publicKeys = new Map<string, KeyObject>();
  readonly #privateKeys = new Map<string, KeyObject>();

  constructor(dir: string) {
    this.#dir = dir;
    ensureDir(dir, 0o700);
    for (const name of readdirSync(dir)) {
      if (!name.endsWith('.jwk.json')) continue;
      const stored = JSON.parse(readFileSync(join(dir, name), 'utf8')) as StoredKey;
      this.#keys.set(stored.kid, stored);
    }
    const activePath = join(dir, 'active');
    const active = existsSync(activePath) ? readFileSync(activePath, 'utf8').trim() : '';
    const activeKey = active ? this.#keys.get(active) : undefined;
    if (activeKey) this.#activate(activeKey);
    else this.rotate();
  }

  get kid(): string {
    return this.#activeKid;
  }

  /** Generate a new key, persist it, then switch to it (crash-safe: the pointer moves last). */
  rotate(): string {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = privateKey.export({ format: 'jwk' }) as StoredKey['privateJwk'];
    const privateJwk = { kty: 'EC' as const, crv: 'P-256' as const, x: jwk.x, y: jwk.y, d: jwk.d };
    const kid = jwkThumbprint(privateJwk);
    const stored: StoredKey = { kid, createdAt: new Date().toISOString(), privateJwk };
    writeFileDurable(join(this.#dir, `${kid}.jwk.json`), JSON.stringify(stored), 0o600);
    this.#keys.set(kid, stored);
    writeFileDurable(join(this.#dir, 'active'), kid + '\n', 0o600);
    this.#activate(stored);
    return kid;
  }

  #activate(stored: StoredKey): void {
    this.#activeKey = createPrivateKey({ key: stored.privateJwk, format: 'jwk' });
    this.#activeKid = stored.kid;
  }

  /** A key's private JWK, for the signing worker (never logged, never leaves the process). */
  privateJwk(kid: string): StoredKey['privateJwk'] {
    const stored = this.#keys.get(kid);
    if (!stored) throw new Error(`no signing key ${kid}`);
    return stored.privateJwk;
  }

  /** The signature value of `payload` under key `kid` (active or retired). */
  signPayloadAs(kid: string, payload: string): string {
    return signPayload(this.#key(kid), payload);
  }

  /**
   * The same value, computed in libuv's thread pool (node:crypto's callback form), so the event
   * loop goes on meanwhile. `done` gets it; should the pool's job fail, it is signed here instead.
   */
  signPayloadAsInPool(kid: string, payload: string, done: (value: string) => void): void {
    const key = this.#key(kid);
    sign('sha256', Buffer.from(payload, 'utf8'), { key, dsaEncoding: 'ieee-p1363' }, (err, value) => {
      done(err ? signPayload(key, payload) : value.toString('base64url'));
    });
  }

  #key(kid: string): KeyObject {
    if (kid === this.#activeKid) return this.#activeKey;
    let key = this.#privateKeys.get(kid);
    if (!key) {
      key = createPrivateKey({ key: this.privateJwk(kid), format: 'jwk' });
      this.#privateKeys.set(kid, key);
    }
    return key;
  }

  /** Sign a message's fields with the active key. */
  signMessage(fields: SignedFields): MessageSignature {
    return { kid: this.#activeKid, alg: 'ES256', value: signPayload(this.#activeKey, messagePayload(fields)), createdAt: fields.createdAt };
  }

  /** Sign a checkpoint's fields with the active key (the payload's own type tag keeps it apart from messages). */
  signCheckpoint(fields: CheckpointFields): CheckpointSignature {
    return { kid: this.#activeKid, alg: 'ES256', value: signPayload(this.#activeKey, checkpointPayload(fields)) };
  }

  /**
   * Whether a message signature verifies with the key its `kid` names (active or retired): for
   * `yello doctor`, which checks stored records the way a reader would.
   */
  verifyMessage(fields: SignedFields, signature: StoredSignature): boolean {
    const stored = this.#keys.get(signature.kid);
    if (!stored || signature.alg !== 'ES256') return false;
    let key = this.#publicKeys.get(signature.kid);
    if (!key) {
      const { kty, crv, x, y } = stored.privateJwk;
      key = createPublicKey({ key: { kty, crv, x, y }, format: 'jwk' });
      this.#publicKeys.set(signature.kid, key);
    }
    const sig = Buffer.from(signature.value, 'base64url');
    return sig.length === 64 && verify('sha256', Buffer.from(messagePayload(fields), 'utf8'), { key, dsaEncoding: 'ieee-p1363' }, sig);
  }

  /** Every key's public half, oldest first. */
  jwks(): Jwks {
    const keys: PublicJwk[] = [...this.#keys.values()]
      .sort((a, b) => byCodeUnits(a.createdAt, b.createdAt))
      .map((k) => ({
        kty: 'EC',
        crv: 'P-256',
        x: k.privateJwk.x,
        y: k.privateJwk.y,
        kid: k.kid,
        alg: 'ES256',
        use: 'sig',
        status: k.kid === this.#activeKid ? 'active' : 'retired',
        createdAt: k.createdAt,
      }));
    return { keys };
  }
}
