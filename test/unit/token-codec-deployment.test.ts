// TokenCodec.forDeployment (docs/design/deployment-secret.md): two codecs built from the same
// deployment secret open each other's tokens; the raw secret used as a plain key (what a
// daemon's secret.key codec would be) and another secret do not, and the per-kind separation
// still holds.

import { createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { TokenCodec } from '../../src/daemon/crypto/token-codec.js';

describe('TokenCodec.forDeployment', () => {
  const secret = randomBytes(32);
  const value = { chat: 'chat_x', position: 7 };

  it('codecs of one deployment secret open each other’s tokens, of the same kind only', () => {
    const token = TokenCodec.forDeployment(secret).seal('history', value);
    const other = TokenCodec.forDeployment(Buffer.from(secret));
    expect(other.open('history', token)).toEqual(value);
    expect(other.open('live', token)).toBeNull();
  });

  it('the stored secret is not itself the key, and another secret opens nothing', () => {
    const token = TokenCodec.forDeployment(secret).seal('batch', value);
    expect(new TokenCodec(secret).open('batch', token)).toBeNull();
    expect(TokenCodec.forDeployment(randomBytes(32)).open('batch', token)).toBeNull();
    expect(TokenCodec.forDeployment(secret).open('batch', new TokenCodec(secret).seal('batch', value))).toBeNull();
  });

  it('the key is HMAC-SHA256 of the secret over "yello deployment seal v1", so every daemon version of a deployment derives the same one', () => {
    const key = createHmac('sha256', secret).update('yello deployment seal v1').digest();
    const token = TokenCodec.forDeployment(secret).seal('cursor', value);
    expect(new TokenCodec(key).open('cursor', token)).toEqual(value);
    expect(TokenCodec.forDeployment(secret).open('cursor', new TokenCodec(key).seal('cursor', value))).toEqual(value);
  });
});
