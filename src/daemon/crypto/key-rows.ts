// Every daemon's public keys in the store (issue 24): each daemon publishes its own at start
// and after a rotation, and `keys.list` answers the union, so a record signed through any
// daemon of a deployment verifies with the keys any of them lists. On LevelDB the store holds
// only this daemon's rows, and the union is this daemon's JWKS.

import type { Jwks, PublicJwk } from '../../shared/types.js';
import type { KeyPort } from '../store/port/store-port.js';
import type { PublicKeyRow } from '../store/port/values.js';
import type { Signer } from './signer.js';
import { byCodeUnits } from '../../shared/text-order.js';

/** This daemon's rows: its identity is its first key's kid (stable across rotations, one per data dir). */
export function keyRows(signer: Signer): PublicKeyRow[] {
  const { keys } = signer.jwks();
  const daemonId = keys[0]?.kid ?? signer.kid;
  return keys.map((k, i) => ({
    kid: k.kid,
    daemonId,
    jwk: { kty: k.kty, crv: k.crv, x: k.x, y: k.y },
    createdAt: k.createdAt,
    // A retired key stopped signing when the next one was made.
    retiredAt: k.status === 'retired' ? (keys[i + 1]?.createdAt ?? k.createdAt) : null,
  }));
}

/** Store this daemon's rows (idempotent by kid). */
export function publishKeys(port: KeyPort, signer: Signer): Promise<void> {
  return port.publish(keyRows(signer));
}

/**
 * `keys.list`: this daemon's keys, and every other daemon's from the store, oldest first. Each
 * daemon's active key is `active` (so on PostgreSQL there is one active key per daemon).
 */
export async function listKeys(port: KeyPort, signer: Signer): Promise<Jwks> {
  const own = signer.jwks().keys;
  const known = new Set(own.map((k) => k.kid));
  const others: PublicJwk[] = [];
  for (const row of await port.all()) {
    if (known.has(row.kid) || typeof row.jwk.x !== 'string' || typeof row.jwk.y !== 'string') continue;
    others.push({
      kty: 'EC',
      crv: 'P-256',
      x: row.jwk.x,
      y: row.jwk.y,
      kid: row.kid,
      alg: 'ES256',
      use: 'sig',
      status: row.retiredAt === null ? 'active' : 'retired',
      createdAt: row.createdAt,
    });
  }
  const keys = [...own, ...others].sort((a, b) => byCodeUnits(a.createdAt, b.createdAt) || byCodeUnits(a.kid, b.kid));
  return { keys };
}
