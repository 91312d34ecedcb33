// verifyRecord(record, jwks) (docs/protocol.md §5, §8) on real records read from the daemon, with
// the JWKS from fetchJwks(): real records pass; any change to the signed facts fails with
// VerificationError; after keys.rotate, old records still verify with the retired key.
// verifyCheckpoint and verifyExport (§5.9) on a real streams.checkpoint and the records it
// covers; the canonical bytes of a record against the documented example.

import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ExportVerifier,
  VerificationError,
  YelloClientError,
  verifyCheckpoint,
  verifyExport,
  verifyRecord,
  type Checkpoint,
  type Jwks,
  type StoredRecord,
  type YelloClient,
} from '../../src/client/index.js';
import { canonicalJson } from '../../src/shared/canonical-json.js';
import { chainDigest } from '../../src/client/hashing.js';
import { readStream, type TestChat, appendMessages, openChatOfTwo, type Hold } from '../helpers/client-fixtures.js';
import { objectContaining } from '../helpers/matchers.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';

const { daemon, admin } = useClientDaemon();
let chat: TestChat;
let alice: YelloClient;
let bob: YelloClient;
/** alice's claim on her outbound stream and where it stands. */
let hold: Hold;

beforeAll(async () => {
  ({ chat, alice, bob, hold } = await openChatOfTwo(daemon(), admin()));
});

afterAll(() => {
  alice.close();
  bob.close();
});

/** alice appends `contents` as one operation at her stream's next position. */
const aliceSends = (...contents: string[]) => appendMessages(alice, hold, contents);

function messagesOf(records: StoredRecord[]): Extract<StoredRecord['wrapper'], { type: 'chat.message' }>[] {
  return records.flatMap((r) => (r.wrapper.type === 'chat.message' ? [r.wrapper] : []));
}

function sha(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('base64url');
}

/** A deep copy of a message record with `change` applied to its message. */
function altered(
  record: StoredRecord,
  change: (m: Extract<StoredRecord['wrapper'], { type: 'chat.message' }>['message']) => void,
): StoredRecord {
  const copy = structuredClone(record);
  if (copy.wrapper.type !== 'chat.message') throw new Error('not a message');
  change(copy.wrapper.message);
  return copy;
}

/** Changes one base64url character in the middle (the last may carry only padding bits). */
function flipChar(s: string): string {
  const i = Math.floor(s.length / 2);
  return s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
}

function expectVerificationError(record: StoredRecord, jwks: Jwks): VerificationError {
  let caught: unknown;
  try {
    verifyRecord(record, jwks);
  } catch (err) {
    caught = err;
  }
  expect(caught, 'verifyRecord should have thrown').toBeInstanceOf(VerificationError);
  expect(caught).toBeInstanceOf(YelloClientError);
  const e = caught as VerificationError;
  expect(e.type).toBe('VERIFICATION_FAILED');
  expect(e.position).toBe(record.position);
  return e;
}

describe('verifyRecord', () => {
  let records: StoredRecord[];
  let jwks: Jwks;
  let sample: StoredRecord;

  beforeAll(async () => {
    await aliceSends('hello bob', 'multi\nline ünïcödé 🐙 text', '');
    await aliceSends('a second operation');
    records = await readStream(bob, chat.alice.streamId);
    jwks = await bob.fetchJwks();
    sample = records.find((r) => r.wrapper.type === 'chat.message' && r.wrapper.message.content === 'hello bob')!;
  });

  it('passes every real record read from the daemon, with the JWKS from fetchJwks()', () => {
    expect(messagesOf(records)).toHaveLength(4);
    expect(jwks.keys.length).toBeGreaterThanOrEqual(1);
    for (const r of records)
      expect(() => {
        verifyRecord(r, jwks);
      }, `position ${r.position}`).not.toThrow();
    // Fences carry no signature and pass as they are.
    expect(records.some((r) => r.wrapper.type === 'chat.writer-fence')).toBe(true);
  });

  it('passes records as chats.history and streams.read return them, for both agents and admin()', async () => {
    const history = await alice.rpc.chats.history({ chatId: chat.chatId, limit: 500 });
    expect(history.entries.length).toBe(4);
    for (const r of history.entries) verifyRecord(r, jwks);
    const asAdmin = await readStream(admin(), chat.alice.streamId);
    for (const r of asAdmin) verifyRecord(r, await admin().fetchJwks());
  });

  it('fails with VerificationError when the content is altered', () => {
    expectVerificationError(
      altered(sample, (m) => {
        m.content = 'hello bib';
      }),
      jwks,
    );
    expectVerificationError(
      altered(sample, (m) => {
        m.content += ' ';
      }),
      jwks,
    );
  });

  it('fails when contentSha256 is altered, alone or together with the content', () => {
    expectVerificationError(
      altered(sample, (m) => {
        m.contentSha256 = flipChar(m.contentSha256);
      }),
      jwks,
    );
    // Content and hash changed consistently: only the signature can catch it.
    expectVerificationError(
      altered(sample, (m) => {
        m.content = 'forged';
        m.contentSha256 = sha('forged');
      }),
      jwks,
    );
  });

  it('fails when the signature value is altered', () => {
    expectVerificationError(
      altered(sample, (m) => {
        m.signature.value = flipChar(m.signature.value);
      }),
      jwks,
    );
    expectVerificationError(
      altered(sample, (m) => {
        m.signature.value = m.signature.value.slice(0, -4);
      }),
      jwks,
    );
    expectVerificationError(
      altered(sample, (m) => {
        m.signature.value = '';
      }),
      jwks,
    );
  });

  it('fails when the signature value is re-encoded non-canonically (padding, stray characters)', () => {
    // §5: base64url without padding. Node's decoder skips such characters, so only an explicit
    // check catches a value that was altered this way.
    expectVerificationError(
      altered(sample, (m) => {
        m.signature.value += '=';
      }),
      jwks,
    );
    expectVerificationError(
      altered(sample, (m) => {
        m.signature.value = `${m.signature.value.slice(0, 40)}.${m.signature.value.slice(40)}`;
      }),
      jwks,
    );
  });

  it('fails when the kid is altered or names no key in the JWKS', () => {
    expectVerificationError(
      altered(sample, (m) => {
        m.signature.kid = flipChar(m.signature.kid);
      }),
      jwks,
    );
    expectVerificationError(sample, { keys: [] });
  });

  it('fails when another signed fact (createdAt, recipient, sender) is altered', () => {
    expectVerificationError(
      altered(sample, (m) => {
        m.signature.createdAt = '2001-01-01T00:00:00.000Z';
      }),
      jwks,
    );
    expectVerificationError(
      altered(sample, (m) => {
        m.toAgentId = chat.alice.id;
      }),
      jwks,
    );
    const wrongAuthor = structuredClone(sample);
    if (wrongAuthor.wrapper.type === 'chat.message') {
      wrongAuthor.wrapper.message.fromAgentId = chat.bob.id;
      wrongAuthor.wrapper.authorAgentId = chat.bob.id;
    }
    expectVerificationError(wrongAuthor, jwks);
  });

  it("fails when a record's author is not the signed sender: a genuine signature moved to another author, or the author swapped", async () => {
    // Guards: "a verified record was signed for its author" (§5: the signed fromAgentId is the
    // wrapper's authorAgentId). Both cases below carry a signature that verifies over its own
    // payload, so only the binding of fromAgentId to the record's author can refuse them.
    const bobClaim = await bob.rpc.streams.claim({ streamId: chat.bob.streamId });
    const bobHold: Hold = { streamId: chat.bob.streamId, token: bobClaim.coordinatorToken, next: bobClaim.nextPosition };
    const sent = await appendMessages(bob, bobHold, ['signed for bob']);
    const bobsRecord = sent.records[0]!;
    verifyRecord(bobsRecord, jwks);
    // bob's genuinely signed message presented as a record of alice's stream, at one of her positions.
    const relabelled = structuredClone(bobsRecord);
    relabelled.streamId = chat.alice.streamId;
    relabelled.position = sample.position;
    relabelled.wrapper.authorAgentId = chat.alice.id;
    expectVerificationError(relabelled, jwks);
    // alice's record with only its author changed: the message still says (and is signed for) alice.
    const swapped = structuredClone(sample);
    swapped.streamId = chat.bob.streamId;
    swapped.wrapper.authorAgentId = chat.bob.id;
    expectVerificationError(swapped, jwks);
  });

  it('after keys.rotate, old records still verify with the retired key and new ones with the new key', async () => {
    const oldKid = admin().session.signing.kid;
    const { kid: newKid } = await admin().rpc.keys.rotate({});
    expect(newKid).not.toBe(oldKid);
    await aliceSends('signed with the new key');

    const all = await readStream(bob, chat.alice.streamId);
    const rotatedJwks = await bob.fetchJwks();
    expect(rotatedJwks.keys.find((k) => k.kid === oldKid)?.status).toBe('retired');
    expect(rotatedJwks.keys.find((k) => k.kid === newKid)?.status).toBe('active');

    const msgs = messagesOf(all);
    expect(msgs.map((m) => m.message.signature.kid)).toEqual([oldKid, oldKid, oldKid, oldKid, newKid]);
    for (const r of all) verifyRecord(r, rotatedJwks);

    // The key matters: an old record re-labelled with the new kid no longer verifies.
    expectVerificationError(
      altered(sample, (m) => {
        m.signature.kid = newKid;
      }),
      rotatedJwks,
    );
    // And without the retired key, old records cannot be checked.
    const onlyNew: Jwks = { keys: rotatedJwks.keys.filter((k) => k.kid === newKid) };
    expectVerificationError(sample, onlyNew);
  });
});

describe('canonical bytes (§5.9)', () => {
  it('sorts members at every depth, drops whitespace, escapes as JSON does, and matches the documented example', () => {
    const record = {
      streamId: 'chat_x:agt_a',
      generation: '1',
      position: '0',
      wrapper: {
        version: 2,
        chatId: 'chat_x',
        authorAgentId: 'agt_a',
        operationId: 'fence.1',
        recordIndex: 0,
        type: 'chat.writer-fence',
        fence: { epoch: '1', claimedAt: '2026-11-30T10:55:19.123Z', replaced: false },
      },
    } as StoredRecord;
    const expected =
      '{"generation":"1","position":"0","streamId":"chat_x:agt_a","wrapper":{"authorAgentId":"agt_a","chatId":"chat_x","fence":{"claimedAt":"2026-11-30T10:55:19.123Z","epoch":"1","replaced":false},"operationId":"fence.1","recordIndex":0,"type":"chat.writer-fence","version":2}}';
    expect(canonicalJson(record)).toBe(expected);
    expect(canonicalJson(JSON.parse(JSON.stringify(record, null, 2)))).toBe(expected);
    expect(chainDigest([record])).toBe(sha(`${expected}\n`));
    expect(chainDigest([record])).toBe('vuo0CUAcaFIpha3QOEc83-ay3F6W3FmawFIW7TZI5mM');
    expect(chainDigest([])).toBe('47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU');
    expect(canonicalJson({ b: 'ü\n"🐙', a: [1, null, { d: true, c: undefined }] })).toBe('{"a":[1,null,{"d":true}],"b":"ü\\n\\"🐙"}');
  });
});

describe('verifyCheckpoint and verifyExport', () => {
  let checkpoint: Checkpoint;
  let records: StoredRecord[];
  let jwks: Jwks;

  beforeAll(async () => {
    await aliceSends('for a checkpoint');
    checkpoint = await bob.rpc.streams.checkpoint({ streamId: chat.alice.streamId, generation: '1' });
    records = await readStream(bob, chat.alice.streamId);
    jwks = await bob.fetchJwks();
  });

  it('a real checkpoint verifies, and covers exactly the records read', () => {
    expect(() => {
      verifyCheckpoint(checkpoint, jwks);
    }).not.toThrow();
    expect(checkpoint).toMatchObject({
      type: 'yello.checkpoint.v1',
      firstPosition: '0',
      nextPosition: String(records.length),
      recordCount: String(records.length),
    });
    expect(checkpoint.chainDigest).toBe(chainDigest(records));
  });

  it('a checkpoint with any signed field changed, an unknown kid, or ids that do not make its streamId fails', () => {
    for (const change of [
      (c: Checkpoint) => {
        c.nextPosition = String(Number(c.nextPosition) + 1);
      },
      (c: Checkpoint) => {
        c.chainDigest = flipChar(c.chainDigest);
      },
      (c: Checkpoint) => {
        c.createdAt = '2001-01-01T00:00:00.000Z';
      },
      (c: Checkpoint) => {
        c.generation = '2';
      },
      (c: Checkpoint) => {
        c.signature.kid = flipChar(c.signature.kid);
      },
      (c: Checkpoint) => {
        c.authorAgentId = chat.bob.id;
      },
    ]) {
      const copy = structuredClone(checkpoint);
      change(copy);
      expect(() => {
        verifyCheckpoint(copy, jwks);
      }).toThrow(VerificationError);
    }
  });

  it('verifyExport takes the text or its lines; ExportVerifier takes one line at a time', () => {
    const lines = [...records.map((r) => JSON.stringify(r)), JSON.stringify({ checkpoint })];
    const whole = verifyExport(lines.join('\n'), jwks);
    expect(whole.problems).toEqual([
      // Only one stream of the chat is here: the other, which the messages name, is missing.
      objectContaining({ kind: 'MISSING_STREAM', streamId: chat.alice.streamId }),
    ]);
    expect(whole).toMatchObject({ records: records.length, checkpoints: 1 });
    expect(whole.generations).toEqual([
      {
        streamId: chat.alice.streamId,
        generation: '1',
        firstPosition: '0',
        nextPosition: String(records.length),
        records: records.length,
        checkpoint: {
          line: lines.length,
          firstPosition: '0',
          nextPosition: String(records.length),
          createdAt: checkpoint.createdAt,
          kid: checkpoint.signature.kid,
        },
      },
    ]);
    expect(verifyExport(lines, jwks)).toEqual(whole);
    const v = new ExportVerifier(jwks);
    for (const l of lines) v.line(l);
    expect(v.result()).toEqual(whole);
  });
});

// Pins behaviour of src/client/verify.ts that the rest of the suite leaves unchecked:
// verify.test.ts checks that a tampered record fails, but each layer of signatureFailure /
// verifyRecord is backed by a later one, so only the problem a person is told shows which check
// caught it. Real records from a real daemon, read through the public client API.
describe('verifyRecord names the check that failed', () => {
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

  describe('verifyRecord on a sample record', () => {
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
      expect(problemOf(tampered((m) => (m.chatId = `${m.chatId}x`)))).toBe(
        `position ${sample.position}: message does not match its wrapper`,
      );
    });
  });
});
