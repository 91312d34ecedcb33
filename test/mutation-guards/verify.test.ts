// Kills mutants of src/client/verify.ts that the mutation run found alive (test/MUTATION.md):
// verify.test.ts checks that a tampered record fails, but each layer of signatureFailure /
// verifyRecord is backed by a later one, so only the problem a person is told shows which check
// caught it. Real records from a real daemon, read through the public client API.

import { beforeAll, describe, expect, it } from 'vitest';
import { VerificationError, verifyRecord, type Jwks, type StoredRecord } from '../../src/client/index.js';
import { appendMessages, openChatOfTwo, readStream } from '../helpers/client-fixtures.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';

const { daemon, admin } = useClientDaemon();
type Message = Extract<StoredRecord['wrapper'], { type: 'chat.message' }>['message'];

let sample: StoredRecord;
let jwks: Jwks;

beforeAll(async () => {
  const { chat, alice, bob, hold } = await openChatOfTwo(daemon(), admin());
  await appendMessages(alice, hold, ['a record to tamper with']);
  const records = await readStream(bob, chat.alice.streamId);
  sample = records.find((r) => r.wrapper.type === 'chat.message')!;
  jwks = await bob.fetchJwks();
  alice.close();
  bob.close();
});

function tampered(change: (m: Message, r: StoredRecord) => void): StoredRecord {
  const copy = structuredClone(sample);
  if (copy.wrapper.type !== 'chat.message') throw new Error('not a message');
  change(copy.wrapper.message, copy);
  return copy;
}

/** verifyRecord's VerificationError message for `record`. */
function problemOf(record: StoredRecord): string {
  try {
    verifyRecord(record, jwks);
  } catch (e) {
    expect(e).toBeInstanceOf(VerificationError);
    return (e as Error).message;
  }
  throw new Error('verifyRecord accepted a tampered record');
}

describe('verifyRecord says which check failed (mutation guards)', () => {
  it('the sample verifies', () => {
    expect(() => {
      verifyRecord(sample, jwks);
    }).not.toThrow();
  });

  it('an alg other than ES256 is refused as such, even with a genuine ES256 signature', () => {
    expect(problemOf(tampered((m) => ((m.signature as { alg: string }).alg = 'ES384')))).toBe(
      `position ${sample.position}: unsupported alg ES384`,
    );
  });

  it('a kid the JWKS does not hold is UNKNOWN_KID', () => {
    expect(problemOf(tampered((m) => (m.signature.kid = 'no-such-kid')))).toBe(`position ${sample.position}: unknown kid no-such-kid`);
  });

  it('a value that is not 86 base64url characters is refused by its form, stray characters before or after too', () => {
    const form = `position ${sample.position}: signature is not 64 bytes of unpadded base64url`;
    expect(problemOf(tampered((m) => (m.signature.value += '=')))).toBe(form);
    expect(problemOf(tampered((m) => (m.signature.value = `.${m.signature.value}`)))).toBe(form);
    expect(problemOf(tampered((m) => (m.signature.value = `${m.signature.value}.`)))).toBe(form);
    expect(problemOf(tampered((m) => (m.signature.value = m.signature.value.slice(0, -1))))).toBe(form);
  });

  it('a value whose last character carries other unused bits is not canonical', () => {
    // 64 bytes are 512 bits; 86 characters carry 516: the last character's low 4 bits are unused.
    const problem = problemOf(
      tampered((m) => {
        const v = m.signature.value;
        const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
        const last = alphabet.indexOf(v.at(-1)!);
        m.signature.value = v.slice(0, -1) + alphabet[(last & ~15) | ((last & 15) ^ 1)]!;
      }),
    );
    expect(problem).toBe(`position ${sample.position}: signature is not canonical base64url`);
  });

  it('a changed signature byte does not verify', () => {
    const problem = problemOf(
      tampered((m) => {
        const v = m.signature.value;
        m.signature.value = v.slice(0, 10) + (v[10] === 'A' ? 'B' : 'A') + v.slice(11);
      }),
    );
    expect(problem).toBe(`position ${sample.position}: signature does not verify`);
  });

  it('altered content is caught by its hash, and a chatId other than the wrapper’s by the binding', () => {
    expect(problemOf(tampered((m) => (m.content += '!')))).toBe(`position ${sample.position}: contentSha256 does not match the content`);
    expect(problemOf(tampered((m) => (m.chatId = `${m.chatId}x`)))).toBe(`position ${sample.position}: message does not match its wrapper`);
  });
});
