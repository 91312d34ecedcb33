// The tests' own §5 verifier (docs/protocol.md §5) must agree with the signing vectors
// (test/fixtures/signing-vectors.json) before it is trusted to judge what the daemon signs.

import { webcrypto } from 'node:crypto';
import { calculateJwkThumbprint, importJWK } from 'jose';
import { describe, expect, it } from 'vitest';
import {
  clientMessageIdFor,
  jwkThumbprint,
  messageProblems,
  sha256b64url,
  signedPayload,
  verifyEs256,
  type PublicJwk,
} from '../helpers/wire-fixtures.js';
import { loadSigningVectors } from '../helpers/signing-vectors.js';

const file = loadSigningVectors();
const publicJwk: PublicJwk = { ...file.testKey.publicJwk, kid: file.testKey.kid };

describe('signing vectors', () => {
  it('the fixture holds vectors to pass and vectors to fail', () => {
    expect(file.vectors.length).toBeGreaterThan(0);
    expect(file.mustFail.length).toBeGreaterThan(0);
  });

  it('computes the RFC 7638 kid of the test key', async () => {
    expect(jwkThumbprint(file.testKey.publicJwk)).toBe(file.testKey.kid);
    expect(await calculateJwkThumbprint(file.testKey.publicJwk, 'sha256')).toBe(file.testKey.kid);
  });

  for (const v of file.vectors) {
    describe(`vector ${v.name}`, () => {
      it('hashes the content, builds the payload and the clientMessageId exactly', () => {
        expect(sha256b64url(v.content)).toBe(v.contentSha256);
        expect(signedPayload({ ...v, createdAt: v.signature.createdAt })).toBe(v.payload);
        expect(clientMessageIdFor(v.chatId, v.fromAgentId, v.messageId)).toBe(v.clientMessageId);
      });

      it('verifies with node:crypto and with WebCrypto via jose', async () => {
        expect(verifyEs256(v.payload, v.signature.value, publicJwk)).toBe(true);
        expect(messageProblems(v, [publicJwk], v.messageId)).toEqual([]);
        // Second opinion: WebCrypto ECDSA takes the raw P1363 r||s form natively.
        const key = (await importJWK({ ...file.testKey.publicJwk, alg: 'ES256' }, 'ES256')) as webcrypto.CryptoKey;
        const ok = await webcrypto.subtle.verify(
          { name: 'ECDSA', hash: 'SHA-256' },
          key,
          Buffer.from(v.signature.value, 'base64url'),
          Buffer.from(v.payload, 'utf8'),
        );
        expect(ok).toBe(true);
      });

      it('fails when the signature is tampered with', () => {
        const sig = Buffer.from(v.signature.value, 'base64url');
        sig[10] = (sig[10]! ^ 1) & 0xff;
        expect(verifyEs256(v.payload, sig.toString('base64url'), publicJwk)).toBe(false);
        expect(verifyEs256(v.payload + 'x', v.signature.value, publicJwk)).toBe(false);
      });
    });
  }

  for (const v of file.mustFail) {
    it(`rejects mustFail vector ${v.name}`, () => {
      expect(messageProblems(v, [publicJwk], v.messageId)).not.toEqual([]);
    });
  }
});
