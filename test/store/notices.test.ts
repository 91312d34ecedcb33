// The notice payloads of the PostgreSQL port (src/daemon/store/postgres/notices.ts): what fits in
// NOTIFY's 8000 bytes goes (the head, or without it), never records, and the digest is
// PostgreSQL's md5(text).

import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { headDigest, NOTICE_MAX_BYTES, noticePayload, type HeadNotice } from '../../src/daemon/store/postgres/notices.js';

const base: HeadNotice = { streamId: 'chat_x:agt_a', generation: 2, nextPosition: 7, digest: 'd'.repeat(32), prev: 'p'.repeat(32) };

describe('noticePayload', () => {
  it('carries the head when it fits, and nothing more', () => {
    const n = { ...base, meta: '{"h":1}' };
    expect(JSON.parse(noticePayload(n))).toEqual(n);
  });

  it('never carries records, whatever the caller passes: a notice is a wake-up (followers read the table)', () => {
    const n = { ...base, meta: '{"h":1}', records: [[6, 'row six']] } as HeadNotice;
    // What goes is exactly the notice's declared fields: a records field would go to every
    // daemon listening, for every append.
    expect(Object.keys(JSON.parse(noticePayload(n)) as object)).not.toContain('records');
  });

  it('leaves the head out when it does not fit: the listener reads it', () => {
    const n = { ...base, meta: 'm'.repeat(NOTICE_MAX_BYTES) };
    const payload = noticePayload(n);
    expect(Buffer.byteLength(payload)).toBeLessThan(NOTICE_MAX_BYTES);
    expect(JSON.parse(payload)).toEqual({ streamId: base.streamId, generation: 2, nextPosition: 7, digest: base.digest });
  });

  it('the longest head that fits in characters and in bytes goes whole', () => {
    const room = NOTICE_MAX_BYTES - JSON.stringify({ ...base, meta: '' }).length - 1;
    const n = { ...base, meta: 'm'.repeat(room) };
    expect(Buffer.byteLength(noticePayload(n))).toBe(NOTICE_MAX_BYTES - 1);
    expect((JSON.parse(noticePayload(n)) as HeadNotice).meta).toBe(n.meta);
  });

  it('counts bytes, not characters (a multi-byte head just under the limit in characters does not fit)', () => {
    const meta = 'é'.repeat(NOTICE_MAX_BYTES / 2);
    expect((JSON.parse(noticePayload({ ...base, meta })) as HeadNotice).meta).toBeUndefined();
  });
});

describe('headDigest', () => {
  it("is md5 of the body's UTF-8 bytes in hex, as PostgreSQL's md5(text)", () => {
    expect(headDigest('é')).toBe(
      createHash('md5')
        .update(Buffer.from([0xc3, 0xa9]))
        .digest('hex'),
    );
    expect(headDigest('')).toBe('d41d8cd98f00b204e9800998ecf8427e');
  });
});
