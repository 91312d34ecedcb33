// The live transcript of one chat for one browser tab: the whole chat across generations (the
// export's reader, so each generation's range is fixed by a checkpoint), then every record
// committed after, as server-sent events. The follow starts *before* the whole-chat read, so
// nothing falls between the two; what both deliver is sent once.

import type { StoredRecord, YelloClient } from '../client/index.js';
import { exportChat } from '../client/chat-export.js';

/** One event to the browser: `event` names it, `data` is JSON. */
export type Send = (event: string, data: unknown) => void;

const key = (r: StoredRecord): string => `${r.streamId}/${r.generation}/${r.position}`;
/** Records per `records` event of the catch-up. */
const CHUNK = 200;

/**
 * Feed `chatId` to `send` until `closed` settles or the subscription ends (a break, an error,
 * the daemon going away: the browser then reconnects and reads everything again). Resolves
 * when the feed is over.
 */
export async function feedChat(c: YelloClient, chatId: string, send: Send, closed: Promise<void>): Promise<void> {
  let subscriptionId: string | null = null;
  let caughtUp = false;
  // Batches may arrive in the same read as the follow's answer, before its id is known here.
  const pending: Array<{ subscriptionId: string; records: StoredRecord[] }> = [];
  let finish!: () => void;
  const over = new Promise<void>((resolve) => (finish = resolve));
  const offs = [
    c.on('chats.batch', (p) => {
      if (!caughtUp) pending.push(p);
      else if (p.subscriptionId === subscriptionId) send('records', p.records);
    }),
    c.on('chats.break', (p) => {
      // A break ends the subscription; before the id is known it can only be ours if the follow answered.
      if (p.subscriptionId !== subscriptionId && subscriptionId !== null) return;
      send('break', p);
      finish();
    }),
    c.on('chats.error', (p) => {
      if (p.subscriptionId !== subscriptionId) return;
      send('failure', { message: p.error.message });
      finish();
    }),
    c.on('disconnected', () => {
      send('failure', { message: 'the console lost its connection to the daemon; reconnecting' });
      finish();
    }),
  ];
  void closed.then(finish);
  try {
    const followed = await c.call('chats.follow', { chatId });
    subscriptionId = followed.subscriptionId;
    send('keys', await c.call('keys.list', {}));
    send('streams', await c.call('chats.get', { chatId }));
    const seen = new Set<string>();
    let chunk: StoredRecord[] = [];
    for await (const item of exportChat(c, chatId)) {
      if ('record' in item) {
        seen.add(key(item.record));
        chunk.push(item.record);
        if (chunk.length >= CHUNK) {
          send('records', chunk);
          chunk = [];
        }
      } else if ('unexportable' in item) send('damage', item.unexportable);
    }
    send('records', chunk);
    send(
      'records',
      pending.filter((p) => p.subscriptionId === subscriptionId).flatMap((p) => p.records.filter((r) => !seen.has(key(r)))),
    );
    pending.length = 0;
    caughtUp = true;
    send('ready', {});
    await over;
  } catch (err) {
    send('failure', { message: (err as Error).message });
  } finally {
    for (const off of offs) off();
    if (subscriptionId !== null) await c.call('chats.unfollow', { subscriptionId }).catch(() => undefined);
  }
}
