// What the default PII policy does to messages (issue 22 finding 7, issue 23 finding 8): under
// `redact`, the default, an IPv4 address and an `sk-…` key are redacted along with the e-mail
// and phone number (before, the address and the key went through), the sender is told what was
// removed and the peer sees only markers; `yello agents policy NAME off|reject` changes it, as
// the README says. Through the SDK client, a raw stdio client and the README's CLI commands.

import { describe, expect, it } from 'vitest';
import { messagesOf, presentedBatch, useMcpWorld } from './mcp-fixtures.js';
import { RawMcp } from './raw-stdio.js';

const world = useMcpWorld();

const KEY = 'sk-' + '9f8e7d6c5b4a3210'.repeat(3);
const TEXT = `mail ops@example.com or call +1 415 555 0100; the box is 203.0.113.42, IPv6 2001:db8::42, key ${KEY}`;
const REDACTED =
  'mail [REDACTED:EMAIL] or call [REDACTED:PHONE]; the box is [REDACTED:IP_ADDRESS], IPv6 [REDACTED:IP_ADDRESS], key [REDACTED:API_KEY]';
const KINDS = [
  { recordIndex: 0, kind: 'API_KEY', count: 1 },
  { recordIndex: 0, kind: 'EMAIL', count: 1 },
  { recordIndex: 0, kind: 'IP_ADDRESS', count: 2 },
  { recordIndex: 0, kind: 'PHONE', count: 1 },
];

async function storedContents(chatId: string): Promise<string[]> {
  const r = await world().admin.rpc.chats.history({ chatId, direction: 'forward' });
  return r.entries.flatMap((e) => (e.wrapper.type === 'chat.message' ? [e.wrapper.message.content] : []));
}

describe('the default PII policy (redact) over MCP', () => {
  it('SDK client: send reports the redactions, the peer and the store see only markers', async () => {
    const chat = await world().chat();
    const alice = await world().serve(chat.aliceToken);
    const sent = await alice.ok('send', { chatId: chat.chatId, text: TEXT });
    expect(sent.redactions).toEqual(KINDS);
    const bob = await world().serve(chat.bobToken);
    expect(messagesOf(presentedBatch(await bob.ok('read_new', { chatId: chat.chatId, waitMs: 10_000 })))).toEqual([REDACTED]);
    expect(await storedContents(chat.chatId)).toEqual([REDACTED]);
  });

  it('raw stdio client: the same on the wire', async () => {
    const chat = await world().chat();
    const raw = RawMcp.start(world().daemon.socketPath, chat.aliceToken);
    try {
      await raw.initialize();
      const sent = await raw.callTool('send', { chatId: chat.chatId, text: TEXT });
      expect(sent.result?.isError).toBeFalsy();
      expect((sent.result?.structuredContent as { redactions: unknown }).redactions).toEqual(KINDS);
      expect(await storedContents(chat.chatId)).toEqual([REDACTED]);
    } finally {
      await raw.close();
    }
  });
});

describe("the README's policy commands", () => {
  it('agents policy NAME off stores text as sent; reject refuses it; redact again redacts', async () => {
    const chat = await world().chat();
    const send = (text: string) => world().cli.run(['--token-file', chat.aliceToken, 'send', chat.chatId, text]);
    const first = await send('box 203.0.113.42');
    expect(first.code, first.stderr).toBe(0);
    expect((await world().cli.run(['agents', 'policy', chat.alice.username, 'off'])).code).toBe(0);
    expect((await send('box 203.0.113.43')).code).toBe(0);
    expect((await world().cli.run(['agents', 'policy', chat.alice.username, 'reject'])).code).toBe(0);
    const refused = await send('box 203.0.113.44');
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/POLICY_REJECTED/);
    expect((await world().cli.run(['agents', 'policy', chat.alice.username, 'redact'])).code).toBe(0);
    expect((await send('box 203.0.113.45')).code).toBe(0);
    expect(await storedContents(chat.chatId)).toEqual(['box [REDACTED:IP_ADDRESS]', 'box 203.0.113.43', 'box [REDACTED:IP_ADDRESS]']);
  });
});
