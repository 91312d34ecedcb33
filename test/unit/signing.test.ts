import { createPrivateKey, createPublicKey, verify } from 'node:crypto';
import { calculateJwkThumbprint } from 'jose';
import { describe, expect, it } from 'vitest';
import { contentSha256 as clientContentSha256 } from '../../src/client/hashing.js';
import { clientMessageId, contentSha256 } from '../../src/daemon/crypto/hashing.js';
import { messagePayload } from '../../src/shared/message-signing.js';
import { jwkThumbprint, signPayload } from '../../src/daemon/crypto/signer.js';
import { loadSigningVectors } from '../helpers/signing-vectors.js';

const file = loadSigningVectors();

describe('message signing encoding (test/fixtures/signing-vectors.json)', () => {
  it('the fixture holds vectors to pass and vectors to fail', () => {
    expect(file.vectors.length).toBeGreaterThan(0);
    expect(file.mustFail.length).toBeGreaterThan(0);
  });

  it('computes the kid as the RFC 7638 thumbprint of the test key', () => {
    expect(jwkThumbprint(file.testKey.publicJwk as never)).toBe(file.testKey.kid);
  });

  for (const v of file.vectors) {
    describe(`vector ${v.name}`, () => {
      it('encodes contentSha256, clientMessageId and the signed payload byte for byte', () => {
        expect(contentSha256(v.content)).toBe(v.contentSha256);
        expect(clientContentSha256(v.content)).toBe(v.contentSha256);
        expect(clientMessageId(v.chatId, v.fromAgentId, v.messageId)).toBe(v.clientMessageId);
        expect(messagePayload({ ...v, contentSha256: contentSha256(v.content) })).toBe(v.payload);
      });

      it('accepts the vector signature with node:crypto, and jose agrees on the kid', async () => {
        const ok = verify(
          'sha256',
          Buffer.from(v.payload, 'utf8'),
          { key: createPublicKey({ key: file.testKey.publicJwk, format: 'jwk' }), dsaEncoding: 'ieee-p1363' },
          Buffer.from(v.signature.value, 'base64url'),
        );
        expect(ok).toBe(true);
        expect(await calculateJwkThumbprint(file.testKey.publicJwk as never, 'sha256')).toBe(v.signature.kid);
      });

      it('produces signatures over the payload that verify (ECDSA is randomized, so not byte-equal)', () => {
        const sig = signPayload(createPrivateKey({ key: file.testKey.privateJwk, format: 'jwk' }), v.payload);
        expect(Buffer.from(sig, 'base64url')).toHaveLength(64);
        expect(
          verify(
            'sha256',
            Buffer.from(v.payload),
            { key: createPublicKey({ key: file.testKey.publicJwk, format: 'jwk' }), dsaEncoding: 'ieee-p1363' },
            Buffer.from(sig, 'base64url'),
          ),
        ).toBe(true);
      });
    });
  }

  for (const v of file.mustFail) {
    it(`rejects mustFail vector ${v.name}`, () => {
      const sha = contentSha256(v.content);
      const payload = messagePayload({ ...v, contentSha256: sha });
      const hashOk = sha === v.contentSha256;
      const sigOk = verify(
        'sha256',
        Buffer.from(payload),
        { key: createPublicKey({ key: file.testKey.publicJwk, format: 'jwk' }), dsaEncoding: 'ieee-p1363' },
        Buffer.from(v.signature.value, 'base64url'),
      );
      expect(hashOk && sigOk).toBe(false);
    });
  }
});
