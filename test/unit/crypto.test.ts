// Pins behaviour of the daemon's crypto and codec modules:
// src/daemon/crypto/{tokens,token-codec,batch-codec,hashing,signer,sign-batcher}.ts,
// src/daemon/store/leveldb/value-codec.ts and src/shared/message-signing.ts. The integration tests
// reach them only through whole appends, where a weaker token check or a checksum with a short hex
// still "works"; here each promise is asserted where it is made: the stored bytes, what a token
// opens to, which signatures verify, and when signing waits.

import { createHash, createHmac, createPublicKey, verify, type KeyObject } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { openBatchId, sealBatchId } from '../../src/daemon/crypto/batch-codec.js';
import { ChainDigest, clientMessageId, contentSha256, sha256Base64url } from '../../src/daemon/crypto/hashing.js';
import { DEFER_MIN_BATCH, SignBatcher } from '../../src/daemon/crypto/sign-batcher.js';
import { Signer } from '../../src/daemon/crypto/signer.js';
import { TokenCodec } from '../../src/daemon/crypto/token-codec.js';
import { hashToken, newToken, randomId, safeEqual } from '../../src/daemon/crypto/tokens.js';
import { decodeValue, encodeValue } from '../../src/daemon/store/leveldb/value-codec.js';
import { checkpointPayload, type CheckpointFields } from '../../src/shared/checkpoint.js';
import {
  CLIENT_MESSAGE_ID_TAG,
  MESSAGE_PAYLOAD_TAG,
  SIGNATURE_ALG,
  clientMessageIdText,
  messagePayload,
} from '../../src/shared/message-signing.js';
import type { StoredRecord } from '../../src/shared/types.js';

const sha = (text: string) => createHash('sha256').update(text, 'utf8').digest('base64url');
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'yl-core-crypto-'));
  dirs.push(dir);
  return dir;
}

describe('message signing encodings (§5)', () => {
  it('the tags, and the texts joined with \\n without a trailing newline', () => {
    expect([MESSAGE_PAYLOAD_TAG, CLIENT_MESSAGE_ID_TAG, SIGNATURE_ALG]).toEqual([
      'yello.chat.message.v1',
      'yello.chat.client-message-id.v1',
      'ES256',
    ]);
    expect(clientMessageIdText('c', 'a', 'm')).toBe('yello.chat.client-message-id.v1\nc\na\nm');
    expect(messagePayload({ chatId: 'c', fromAgentId: 'f', toAgentId: 't', createdAt: 'T', contentSha256: 'h' })).toBe(
      'yello.chat.message.v1\nc\nf\nt\nT\nh',
    );
  });
});

describe('hashing (daemon)', () => {
  it('SHA-256 over UTF-8 as unpadded base64url; contentSha256 and clientMessageId are it', () => {
    expect(sha256Base64url('')).toBe('47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU');
    expect(sha256Base64url('é')).toBe(sha('é'));
    expect(contentSha256('hello')).toBe(sha('hello'));
    expect(clientMessageId('c', 'a', 'm')).toBe(sha('yello.chat.client-message-id.v1\nc\na\nm'));
  });

  it('ChainDigest hashes the canonical records, each followed by \\n', () => {
    const record = { position: '0', streamId: 's' } as unknown as StoredRecord;
    const d = new ChainDigest();
    d.add(record);
    expect(d.digest()).toBe(sha('{"position":"0","streamId":"s"}\n'));
  });
});

describe('stored value codec', () => {
  it('a value is crc32(key + "\\n" + json) as 8 lowercase hex digits, then the JSON', () => {
    const expected = (crc32('{"a":1}', crc32('k\n')) >>> 0).toString(16).padStart(8, '0');
    expect(encodeValue('k', '{"a":1}')).toBe(`${expected}{"a":1}`);
    expect(decodeValue('k', encodeValue('k', '{"a":1}'))).toBe('{"a":1}');
  });

  it('a checksum with leading zeros keeps all 8 digits', () => {
    let i = 0;
    while (crc32(String(i), crc32('k\n')) >= 0x1000_0000) i++;
    const json = String(i);
    const raw = encodeValue('k', json);
    expect(raw.slice(0, 1)).toBe('0');
    expect(raw).toHaveLength(8 + json.length);
    expect(decodeValue('k', raw)).toBe(json);
  });

  it('the shortest value (one character of JSON) decodes; anything shorter, another key or changed bytes is null', () => {
    expect(decodeValue('k', encodeValue('k', '1'))).toBe('1');
    expect(decodeValue('k', encodeValue('k', ''))).toBeNull();
    expect(decodeValue('k', encodeValue('k', '1').slice(0, 8))).toBeNull();
    expect(decodeValue('k2', encodeValue('k', '1'))).toBeNull();
    expect(decodeValue('k', encodeValue('k', '12').slice(0, 9) + '3')).toBeNull();
    // The key and the JSON are separated: "ab" + "c" is not "a" + "bc".
    expect(decodeValue('a', encodeValue('ab', 'c').slice(0, 8) + 'bc')).toBeNull();
  });
});

describe('tokens', () => {
  it('randomId: the prefix and 26 characters of the base32 alphabet, all of it used', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const id = randomId('agt_');
      expect(id).toMatch(/^agt_[a-z2-7]{26}$/);
      for (const c of id.slice(4)) seen.add(c);
    }
    expect([...seen].sort().join('')).toBe('234567abcdefghijklmnopqrstuvwxyz');
  });

  it('newToken: the prefix and 32 random bytes of base64url; never the same twice', () => {
    const a = newToken('ylt_');
    expect(a).toMatch(/^ylt_[A-Za-z0-9_-]{43}$/);
    expect(newToken('ylt_')).not.toBe(a);
  });

  it('hashToken is the SHA-256 of the token; safeEqual compares whole strings', () => {
    expect(hashToken('ylt_x')).toBe(sha('ylt_x'));
    expect(safeEqual('abc', 'abc')).toBe(true);
    expect(safeEqual('abc', 'abd')).toBe(false);
    expect(safeEqual('abc', 'abcd')).toBe(false);
    expect(safeEqual('', '')).toBe(true);
  });
});

describe('TokenCodec', () => {
  const key = Buffer.alloc(32, 7);
  const codec = new TokenCodec(key);
  const mac = (kind: string, body: string) => createHmac('sha256', key).update(`${kind}\n${body}`).digest('base64url').slice(0, 32);

  it('seals base64url JSON with a 32-character HMAC of kind and body', () => {
    const token = codec.seal('batch', [1, 'x']);
    const body = Buffer.from('[1,"x"]', 'utf8').toString('base64url');
    expect(token).toBe(`${body}.${mac('batch', body)}`);
    expect(codec.open('batch', token)).toEqual([1, 'x']);
    expect(codec.seal('k', 'é')).toBe(
      `${Buffer.from('"é"', 'utf8').toString('base64url')}.${mac('k', Buffer.from('"é"').toString('base64url'))}`,
    );
    expect(codec.open('k', codec.seal('k', 'é'))).toBe('é');
  });

  it('opens only its own kind, key and unchanged bytes', () => {
    const token = codec.seal('batch', { a: 1 });
    expect(codec.open('cursor', token)).toBeNull();
    expect(new TokenCodec(Buffer.alloc(32, 8)).open('batch', token)).toBeNull();
    expect(codec.open('batch', `${token}x`)).toBeNull();
    expect(codec.open('batch', token.slice(0, -1))).toBeNull();
    expect(codec.open('batch', `e${token}`)).toBeNull();
  });

  it('a token without a body, without a dot, or whose MACed body is not JSON is null', () => {
    expect(codec.open('batch', `.${mac('batch', '')}`)).toBeNull();
    expect(codec.open('batch', 'nodot')).toBeNull();
    expect(codec.open('batch', '')).toBeNull();
    const notJson = Buffer.from('{not json', 'utf8').toString('base64url');
    expect(codec.open('batch', `${notJson}.${mac('batch', notJson)}`)).toBeNull();
    // The first dot ends the body: the MAC is all that follows it.
    const body = Buffer.from('1', 'utf8').toString('base64url');
    expect(codec.open('batch', `${body}.${mac('batch', body)}`)).toBe(1);
    expect(codec.open('batch', `${body}.x.${mac('batch', body)}`)).toBeNull();
  });

  it('batch ids: the five members round-trip; a token of another kind or shape is not one', () => {
    const b = { reader: 'agt_r', streamId: 'c:a', generation: 2, fromPosition: 3, nextPosition: 9 };
    const id = sealBatchId(codec, b);
    expect(codec.open('batch', id)).toEqual(['agt_r', 'c:a', 2, 3, 9]);
    expect(openBatchId(codec, id)).toEqual(b);
    expect(openBatchId(codec, codec.seal('cursor', ['agt_r', 'c:a', 2, 3, 9]))).toBeNull();
    expect(openBatchId(codec, codec.seal('batch', ['agt_r', 'c:a', 2, 3]))).toBeNull();
    expect(openBatchId(codec, codec.seal('batch', ['agt_r', 'c:a', 2, 3, 9, 10]))).toBeNull();
    expect(openBatchId(codec, codec.seal('batch', { length: 5 }))).toBeNull();
  });
});

describe('Signer', () => {
  const fields = { chatId: 'c', fromAgentId: 'f', toAgentId: 't', createdAt: '2026-01-01T00:00:00.000Z', contentSha256: sha('x') };
  const publicKeyOf = (signer: Signer, kid: string): KeyObject => {
    const k = signer.jwks().keys.find((j) => j.kid === kid)!;
    return createPublicKey({ key: { kty: k.kty, crv: k.crv, x: k.x, y: k.y }, format: 'jwk' });
  };
  const verifies = (key: KeyObject, payload: string, value: string) =>
    verify('sha256', Buffer.from(payload, 'utf8'), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(value, 'base64url'));

  it('a new directory gets one active key: 0700 directory, 0600 files, the active pointer last', () => {
    const dir = path.join(tempDir(), 'keys');
    const signer = new Signer(dir);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(readdirSync(dir).sort()).toEqual([`${signer.kid}.jwk.json`, 'active'].sort());
    expect(readFileSync(path.join(dir, 'active'), 'utf8')).toBe(`${signer.kid}\n`);
    for (const f of readdirSync(dir)) expect(statSync(path.join(dir, f)).mode & 0o777).toBe(0o600);
    const stored = JSON.parse(readFileSync(path.join(dir, `${signer.kid}.jwk.json`), 'utf8')) as Record<string, unknown>;
    expect(Object.keys(stored).sort()).toEqual(['createdAt', 'kid', 'privateJwk']);
    expect(Object.keys(stored.privateJwk as object).sort()).toEqual(['crv', 'd', 'kty', 'x', 'y']);
    expect(signer.jwks()).toEqual({
      keys: [
        {
          kty: 'EC',
          crv: 'P-256',
          x: (stored.privateJwk as { x: string }).x,
          y: (stored.privateJwk as { y: string }).y,
          kid: signer.kid,
          alg: 'ES256',
          use: 'sig',
          status: 'active',
          createdAt: stored.createdAt,
        },
      ],
    });
  });

  it('reopening keeps the active key and ignores other files; a pointer to no key makes a new one', () => {
    const dir = path.join(tempDir(), 'keys');
    const first = new Signer(dir);
    writeFileSync(path.join(dir, 'notes.txt'), 'not a key');
    const again = new Signer(dir);
    expect(again.kid).toBe(first.kid);
    expect(again.jwks()).toEqual(first.jwks());
    writeFileSync(path.join(dir, 'active'), 'no-such-kid\n');
    const fresh = new Signer(dir);
    expect(fresh.kid).not.toBe(first.kid);
    expect(fresh.jwks().keys.map((k) => [k.kid, k.status])).toEqual([
      [first.kid, 'retired'],
      [fresh.kid, 'active'],
    ]);
    rmSync(path.join(dir, 'active'));
    const noPointer = new Signer(dir);
    expect(noPointer.jwks().keys).toHaveLength(3);
    expect(noPointer.kid).not.toBe(fresh.kid);
  });

  it('a reopened directory lists its keys oldest first, whatever order the file system gives their files', () => {
    const made = path.join(tempDir(), 'keys');
    const s = new Signer(made);
    const k2 = s.rotate();
    const k1 = s.jwks().keys.find((k) => k.kid !== k2)!.kid;
    const file = (kid: string) => JSON.parse(readFileSync(path.join(made, `${kid}.jwk.json`), 'utf8')) as Record<string, unknown>;
    // The same two key files, written in the same order, once with k1 the older and once with k2:
    // whatever order readdir answers, one of the two directories has it against the creation order.
    for (const [older, newer] of [
      [k1, k2],
      [k2, k1],
    ] as const) {
      const dir = path.join(tempDir(), 'keys');
      const stamped = { [older]: '2026-01-01T00:00:00.000Z', [newer]: '2026-01-02T00:00:00.000Z' };
      new Signer(dir); // makes the directory (and a key of its own, removed next)
      for (const name of readdirSync(dir)) rmSync(path.join(dir, name));
      for (const kid of [k1, k2])
        writeFileSync(path.join(dir, `${kid}.jwk.json`), JSON.stringify({ ...file(kid), createdAt: stamped[kid] }));
      writeFileSync(path.join(dir, 'active'), `${k2}\n`);
      expect(new Signer(dir).jwks().keys.map((k) => [k.kid, k.createdAt])).toEqual([
        [older, stamped[older]],
        [newer, stamped[newer]],
      ]);
    }
  });

  it('rotate switches to a new key, listed after the old ones, which keep signing and verifying', () => {
    const signer = new Signer(path.join(tempDir(), 'keys'));
    const old = signer.kid;
    const before = signer.signMessage(fields);
    const kid = signer.rotate();
    expect(signer.kid).toBe(kid);
    expect(kid).not.toBe(old);
    expect(signer.jwks().keys.map((k) => [k.kid, k.status])).toEqual([
      [old, 'retired'],
      [kid, 'active'],
    ]);
    expect(signer.verifyMessage(fields, before)).toBe(true);
    // A retired key signs (twice: the second from the cache) and verifies.
    for (let i = 0; i < 2; i++) expect(verifies(publicKeyOf(signer, old), 'p', signer.signPayloadAs(old, 'p'))).toBe(true);
    expect(verifies(publicKeyOf(signer, kid), 'p', signer.signPayloadAs(kid, 'p'))).toBe(true);
    expect(verifies(publicKeyOf(signer, kid), 'p', signer.signPayloadAs(old, 'p'))).toBe(false);
    expect(() => signer.signPayloadAs('no-such-kid', 'p')).toThrow('no signing key no-such-kid');
    expect(() => signer.privateJwk('no-such-kid')).toThrow('no signing key no-such-kid');
    expect(signer.privateJwk(kid)).toMatchObject({ kty: 'EC', crv: 'P-256' });
  });

  it('signMessage and signCheckpoint sign the §5 and §5.9 payloads with the active key', () => {
    const signer = new Signer(path.join(tempDir(), 'keys'));
    const s = signer.signMessage(fields);
    expect(Object.keys(s).sort()).toEqual(['alg', 'createdAt', 'kid', 'value']);
    expect(s).toMatchObject({ kid: signer.kid, alg: 'ES256', createdAt: fields.createdAt });
    expect(verifies(publicKeyOf(signer, signer.kid), messagePayload(fields), s.value)).toBe(true);
    const cf: CheckpointFields = {
      streamId: 'c:a',
      chatId: 'c',
      authorAgentId: 'a',
      generation: '1',
      firstPosition: '0',
      nextPosition: '1',
      recordCount: '1',
      chainDigest: sha('d'),
      createdAt: fields.createdAt,
    } as CheckpointFields;
    const c = signer.signCheckpoint(cf);
    expect(Object.keys(c).sort()).toEqual(['alg', 'kid', 'value']);
    expect(c).toMatchObject({ kid: signer.kid, alg: 'ES256' });
    expect(verifies(publicKeyOf(signer, signer.kid), checkpointPayload(cf), c.value)).toBe(true);
  });

  it('verifyMessage: only a 64-byte ES256 signature by a known key over exactly these fields', () => {
    const signer = new Signer(path.join(tempDir(), 'keys'));
    const s = signer.signMessage(fields);
    expect(signer.verifyMessage(fields, s)).toBe(true);
    expect(signer.verifyMessage(fields, s)).toBe(true); // the public key from the cache
    expect(signer.verifyMessage({ ...fields, toAgentId: 'u' }, s)).toBe(false);
    expect(signer.verifyMessage(fields, { ...s, alg: 'ES384' })).toBe(false);
    expect(signer.verifyMessage(fields, { ...s, kid: 'no-such-kid' })).toBe(false);
    const bytes = Buffer.from(s.value, 'base64url');
    expect(signer.verifyMessage(fields, { ...s, value: Buffer.concat([bytes, Buffer.from([0])]).toString('base64url') })).toBe(false);
    // A signature made by another daemon's key under this kid does not verify.
    const other = new Signer(path.join(tempDir(), 'keys'));
    expect(signer.verifyMessage(fields, { ...other.signMessage(fields), kid: signer.kid })).toBe(false);
  });
});

describe('SignBatcher: when signing waits', () => {
  const setup = (options?: { minBatch?: number }) => {
    const signer = new Signer(path.join(tempDir(), 'keys'));
    const batcher = new SignBatcher(signer, options);
    const j = signer.jwks().keys[0]!;
    const key = createPublicKey({ key: { kty: j.kty, crv: j.crv, x: j.x, y: j.y }, format: 'jwk' });
    return { signer, batcher, key };
  };
  const turn = () => new Promise((r) => setImmediate(r));
  const kinds = (values: Array<string | Promise<string>>) => values.map((v) => (typeof v === 'string' ? 'now' : 'later')).join(' ');

  it(`the default: the first ${DEFER_MIN_BATCH - 1} of a turn at once, the rest at its end; the next turn after a busy one waits from its first`, async () => {
    expect(DEFER_MIN_BATCH).toBe(4);
    const { signer, batcher } = setup();
    const one = Array.from({ length: 6 }, (_, i) => batcher.sign(signer.kid, `a${i}`));
    expect(kinds(one)).toBe('now now now later later later');
    expect(batcher.stats).toEqual({ immediate: 3, deferred: 0, threadPool: 0 });
    await turn();
    expect(batcher.stats).toEqual({ immediate: 3, deferred: 3, threadPool: 3 });
    expect(kinds([batcher.sign(signer.kid, 'b')])).toBe('later');
    await turn();
    // The busy turn is forgotten after one quiet turn.
    expect(kinds([batcher.sign(signer.kid, 'c')])).toBe('now');
    await turn();
    expect(batcher.stats).toEqual({ immediate: 4, deferred: 4, threadPool: 4 });
  });

  it('a turn of exactly minBatch requests makes the next one wait; one of minBatch - 1 does not', async () => {
    const { signer, batcher } = setup({ minBatch: 3 });
    expect(kinds([0, 1].map((i) => batcher.sign(signer.kid, `${i}`)))).toBe('now now');
    await turn();
    expect(kinds([batcher.sign(signer.kid, 'x')])).toBe('now');
    await turn();
    expect(kinds([0, 1, 2].map((i) => batcher.sign(signer.kid, `${i}`)))).toBe('now now later');
    await turn();
    expect(kinds([batcher.sign(signer.kid, 'y')])).toBe('later');
    await turn();
  });

  it('every value verifies over its own payload, at once or deferred; close() signs what waits, once', async () => {
    const { signer, batcher, key } = setup({ minBatch: 1 });
    const values = ['p0', 'p1', 'p2'].map((p) => batcher.sign(signer.kid, p));
    expect(kinds(values)).toBe('later later later');
    void batcher.close();
    expect(batcher.stats).toEqual({ immediate: 0, deferred: 3, threadPool: 0 });
    const signed = await Promise.all(values.map((v) => Promise.resolve(v)));
    signed.forEach((v, i) => {
      expect(verify('sha256', Buffer.from(`p${i}`), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(v, 'base64url'))).toBe(true);
    });
    await turn();
    expect(batcher.stats).toEqual({ immediate: 0, deferred: 3, threadPool: 0 });
  });
});
