// The one follow primitive (src/client/chat-follow.ts) and the readers built on it, against a
// daemon that sends a subscription's first batch in the same write as the chats.follow answer
// (what a real daemon does when a batch commits while the follow is answered): the batch is
// dispatched before the caller has the subscription id, and must not be dropped.

import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { followChat } from '../../src/client/chat-follow.js';
import { YelloClient } from '../../src/client/index.js';
import type { ChatBatchNotification } from '../../src/shared/types.js';
import { makeTempDir } from '../helpers/client-fixtures.js';
import { parseJsonLines, startCli } from '../helpers/cli-runner.js';
import { FakeDaemon, helloAnswer, type FakeRequest } from '../helpers/fake-daemon.js';
import { waitFor } from '../helpers/wait.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

const chatId = 'chat_early';
const streamId = `${chatId}:agt_a`;
const agent = (id: string, username: string) => ({
  id,
  username,
  name: username,
  image: null,
  disabled: false,
  createdAt: '2026-01-01T00:00:00.000Z',
});

function batch(subscriptionId: string, position: number, content: string): ChatBatchNotification {
  return {
    subscriptionId,
    chatId,
    streamId,
    generation: '1',
    fromPosition: String(position),
    nextPosition: String(position + 1),
    batchId: `b${position}`,
    cursor: `c${position + 1}`,
    records: [
      {
        streamId,
        generation: '1',
        position: String(position),
        wrapper: {
          type: 'chat.message',
          chatId,
          authorAgentId: 'agt_a',
          message: {
            chatId,
            fromAgentId: 'agt_a',
            toAgentId: 'agt_b',
            content,
            contentSha256: 'x',
            signature: { alg: 'ES256', kid: 'k', createdAt: '2026-01-01T00:00:00.000Z', value: 'v' },
          },
        },
      },
    ],
  } as unknown as ChatBatchNotification;
}

const line = (v: unknown) => JSON.stringify(v) + '\n';

/**
 * An admin daemon whose chats.follow answer is followed, in the same write, by the
 * subscription's first batch, and (in the next write) by a batch of another subscription.
 */
function earlyBatches(req: FakeRequest): unknown {
  if (req.method === 'session.hello') return helloAnswer(req);
  if (req.method === 'chats.get')
    return {
      jsonrpc: '2.0',
      id: req.id,
      result: {
        chat: { id: chatId, agentAId: 'agt_a', agentBId: 'agt_b', agentA: agent('agt_a', 'alice'), agentB: agent('agt_b', 'bob') },
        streams: [],
      },
    };
  if (req.method === 'chats.follow')
    return (
      line({ jsonrpc: '2.0', id: req.id, result: { subscriptionId: 'sub1', cursor: 'c0' } }) +
      line({ jsonrpc: '2.0', method: 'chats.batch', params: batch('sub1', 0, "in the answer's read") }) +
      line({ jsonrpc: '2.0', method: 'chats.batch', params: batch('other', 7, 'not ours') }) +
      line({ jsonrpc: '2.0', method: 'chats.batch', params: batch('sub1', 1, 'later') })
    );
  return { jsonrpc: '2.0', id: req.id, result: {} };
}

async function fake(): Promise<FakeDaemon> {
  const dir = await makeTempDir('ycf-');
  cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
  const d = await FakeDaemon.start(path.join(dir, 'fake.sock'), earlyBatches);
  cleanups.push(() => d.close());
  return d;
}

describe('followChat', () => {
  it('hands over the batch that came in the same read as the answer, in order, and only its own', async () => {
    const d = await fake();
    const client = await YelloClient.connect({ token: 'yello_admin_fake', socketPath: d.socketPath, verifySocket: false });
    cleanups.push(() => {
      client.close();
    });
    const got: string[] = [];
    const f = await followChat(client, { chatId }, { batch: (b) => got.push(b.fromPosition), break: () => {}, error: () => {} });
    expect(f.subscriptionId).toBe('sub1');
    await waitFor(() => got.length >= 2, 'both batches');
    expect(got).toEqual(['0', '1']);
    f.close();
  });
});

describe('yello chats follow as the admin', () => {
  it('prints the batch that came in the same read as the follow answer', async () => {
    const d = await fake();
    const dir = path.dirname(d.socketPath);
    await fs.writeFile(path.join(dir, 'admin.token'), 'yello_admin_fake\n', { mode: 0o600 });
    const run = startCli([
      'chats',
      'follow',
      chatId,
      '--json',
      '--socket',
      d.socketPath,
      '--admin-token-file',
      path.join(dir, 'admin.token'),
    ]);
    cleanups.push(() => run.kill());
    // Both batches are written with the answer: once the later one is printed, the first had its chance.
    await run.waitFor(() => run.lines.some((l) => l.includes('"later"')), 'the later batch');
    const res = await run.stop('SIGINT');
    const positions = parseJsonLines<ChatBatchNotification>(res.stdout).map((b) => b.fromPosition);
    expect(positions, res.stderr).toEqual(['0', '1']);
  });
});
