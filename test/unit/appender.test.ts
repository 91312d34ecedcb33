// Pins appender.ts's `ready` of a commit: an append whose signatures are computed later (the sign
// batcher defers a busy turn's signing to its end) commits only once they are in its records. No
// socket test saw it: the batcher's deferred signatures resolve at the end of the same turn, before
// the store's group commit writes, so a commit that did not wait still found them filled in. Here
// the signatures come 30 ms late (a batcher that waits before answering, as a loaded machine
// might), and what was written is read back from disk after a reopen and verified against the
// daemon's keys: every stored message signed, the promise of docs/protocol.md §5.

import path from 'node:path';
import { rmSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { verifyRecord } from '../../src/client/verify.js';
import { SignBatcher } from '../../src/daemon/crypto/sign-batcher.js';
import { Signer } from '../../src/daemon/crypto/signer.js';
import { PAGE_BYTES } from '../../src/daemon/limits.js';
import { makeTempDir } from '../helpers/daemon-process.js';
import { appendMessages, chatWithWriter, openInProcess } from '../helpers/in-process-store.js';
import { sleep } from '../helpers/wait.js';

/** Signs as the daemon does, answering 30 ms later. */
class LateSigner extends SignBatcher {
  override sign(kid: string, payload: string): Promise<string> {
    const value = super.sign(kid, payload);
    return sleep(30).then(() => value);
  }
}

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('an append commits its records only with their signatures', () => {
  it('signatures that come late are in the records written, which verify after a reopen', async () => {
    const dir = await makeTempDir('yl-late-sign-');
    dirs.push(dir);
    const s = await openInProcess(dir, { signBatcher: (signer) => new LateSigner(signer) });
    let w: Awaited<ReturnType<typeof chatWithWriter>>;
    try {
      w = await chatWithWriter(s);
      await appendMessages(s, w, 3);
    } finally {
      await s.close();
    }
    const again = await openInProcess(dir);
    try {
      const batch = await again.streams.read(w.bob, {
        streamId: w.streamId,
        generation: 1,
        fromPosition: 0,
        limit: 100,
        maxBytes: PAGE_BYTES,
      });
      const messages = batch.records.filter((r) => r.wrapper.type === 'chat.message');
      expect(messages).toHaveLength(3);
      const jwks = new Signer(path.join(dir, 'keys')).jwks();
      for (const r of messages)
        expect(() => {
          verifyRecord(r, jwks);
        }).not.toThrow();
    } finally {
      await again.close();
    }
  });
});
