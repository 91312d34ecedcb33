// The hand-written acceptor of streams.append params must accept only what the zod schema
// accepts and return exactly what it returns; everything else is left to the schema.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fastParams } from '../../src/shared/fast-params.js';
import { paramSchemas } from '../../src/shared/schemas.js';

const fast = fastParams['streams.append']!;
const schema = paramSchemas['streams.append'];

// Values near the edges of every rule: lengths, patterns, decimals, types, extra keys.
const idLike = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9_-]{1,130}$/),
  fc.constantFrom('', 'a b', 'ünï', 'x'.repeat(128), 'x'.repeat(129), 'a:b', 'chat_1'),
);
const decimalLike = fc.oneof(fc.constantFrom('0', '1', '17', '01', '-1', '1e3', '', ' 1', '9007199254740991', '9999999999999999', '10000000000000000'), fc.nat().map(String), fc.integer().map((n) => n as unknown as string));
const streamIdLike = fc.oneof(fc.tuple(idLike, idLike).map(([a, b]) => `${a}:${b}`), idLike, fc.constant('a:b:c'));
const textLike = fc.oneof(fc.string({ maxLength: 50 }), fc.string({ unit: 'binary', maxLength: 20 }), fc.constantFrom('\ud800', 'ok\udfff', 'x'.repeat(262_144), 'x'.repeat(262_145)), fc.integer() as fc.Arbitrary<unknown>);
const extra = fc.option(fc.dictionary(fc.constantFrom('extra', 'type', 'streamId', '__proto__', 'content'), fc.jsonValue(), { maxKeys: 1 }), { nil: undefined });

const message = fc.record({ type: fc.constantFrom('chat.message', 'chat.receipt', 'other') as fc.Arbitrary<string>, messageId: fc.oneof(idLike, fc.constantFrom('a.b:c@d/e', 'x'.repeat(256), 'x'.repeat(257))), content: textLike }, { requiredKeys: ['type'] });
const receipt = fc.record({ type: fc.constant('chat.receipt') as fc.Arbitrary<string>, peerStreamId: streamIdLike, peerGeneration: decimalLike, nextPosition: decimalLike, batchId: fc.oneof(fc.string({ maxLength: 40 }), fc.constant('x'.repeat(1025))) }, { requiredKeys: ['type'] });
const record = fc.tuple(fc.oneof(message, receipt), extra).map(([r, e]) => ({ ...r, ...e }));

const params = fc.tuple(
  fc.record(
    {
      streamId: streamIdLike,
      coordinatorToken: fc.oneof(fc.string({ maxLength: 40 }), fc.constant('t'.repeat(257))),
      generation: decimalLike,
      expectedPosition: decimalLike,
      operationId: idLike,
      records: fc.oneof(fc.array(record, { minLength: 0, maxLength: 4 }), fc.constant(Array.from({ length: 65 }, () => ({ type: 'chat.message', messageId: 'm', content: 'c' })))),
    },
    { requiredKeys: [] },
  ),
  extra,
).map(([p, e]) => ({ ...p, ...e }));

// Mostly-valid inputs, so the acceptor's "yes" path is exercised as much as its "no".
const okId = fc.stringMatching(/^[A-Za-z0-9_-]{1,12}$/);
const okDecimal = fc.oneof(fc.constant('0'), fc.integer({ min: 1, max: 10_000_000 }).map(String));
const okRecord = fc.oneof(
  fc.record({ type: fc.constant('chat.message'), messageId: fc.stringMatching(/^[A-Za-z0-9_.:@/-]{1,20}$/), content: fc.string({ maxLength: 30 }) }),
  fc.record({ type: fc.constant('chat.receipt'), peerStreamId: fc.tuple(okId, okId).map(([a, b]) => `${a}:${b}`), peerGeneration: okDecimal, nextPosition: okDecimal, batchId: fc.string({ minLength: 1, maxLength: 30 }) }),
);
const validParams = fc.record({
  streamId: fc.tuple(okId, okId).map(([a, b]) => `${a}:${b}`),
  coordinatorToken: fc.string({ minLength: 1, maxLength: 40 }),
  generation: okDecimal,
  expectedPosition: okDecimal,
  operationId: okId,
  records: fc.array(okRecord, { minLength: 1, maxLength: 4 }),
});

// A valid input with exactly one field (top level or inside one record) swapped for an edge value.
const edge = fc.oneof(idLike, decimalLike, streamIdLike, textLike, fc.jsonValue(), fc.constantFrom(undefined, 'x'.repeat(257), 'x'.repeat(1024), 'x'.repeat(1025)));
const mutated = fc.tuple(validParams, fc.integer({ min: 0, max: 2 }), fc.nat(), fc.nat(), edge).map(([p, where, key, rec, value]) => {
  const copy: Record<string, unknown> = { ...p, records: p.records.map((r) => ({ ...r })) };
  const records = copy.records as Array<Record<string, unknown>>;
  const r = records[rec % records.length]!;
  if (where === 0) {
    const keys = Object.keys(copy);
    copy[keys[key % keys.length]!] = value;
  } else if (where === 1) {
    const keys = Object.keys(r);
    r[keys[key % keys.length]!] = value;
  } else if (key % 2 === 0) {
    copy.extra = value;
  } else {
    r.extra = value;
  }
  return copy;
});

describe('the fast acceptor of streams.append params', () => {
  it('accepts only what the schema accepts, and returns the same value (property)', () => {
    let accepted = 0;
    fc.assert(
      fc.property(fc.oneof({ arbitrary: validParams, weight: 2 }, { arbitrary: mutated, weight: 4 }, { arbitrary: params, weight: 1 }, { arbitrary: fc.jsonValue(), weight: 1 }), (raw) => {
        const f = fast(raw);
        if (f === undefined) return true;
        accepted++;
        const z = schema.safeParse(raw);
        expect(z.success).toBe(true);
        expect(f).toEqual(z.data);
        return true;
      }),
      { numRuns: 30_000 },
    );
    // Not vacuous: a good share of the generated inputs is valid.
    expect(accepted).toBeGreaterThan(6_000);
  });

  it('accepts the usual append and receipt shapes', () => {
    const p = {
      streamId: 'chat_a:agt_b', coordinatorToken: 'yello_ct_x', generation: '1', expectedPosition: '17', operationId: 'op-1',
      records: [{ type: 'chat.message', messageId: 'm-1', content: 'hi' }, { type: 'chat.receipt', peerStreamId: 'chat_a:agt_c', peerGeneration: '1', nextPosition: '4', batchId: 'b.x' }],
    };
    expect(fast(p)).toEqual(schema.parse(p));
  });
});
