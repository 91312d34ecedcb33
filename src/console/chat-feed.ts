// The live transcript of one chat for one browser tab: the whole chat across generations (the
// export's reader, so each generation's range is fixed by a checkpoint), then every record
// committed after, as server-sent events. The follow starts *before* the whole-chat read, so
// nothing falls between the two; what both deliver is sent once.

import type { StoredRecord, YelloClient } from '../client/index.js';
import { exportChat } from '../client/chat-export.js';
import { followChat, type ChatFollow } from '../client/chat-follow.js';

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
  // Live batches wait here until the whole-chat read is out; then what both delivered is sent once.
  let pending: StoredRecord[][] | null = [];
  let finish!: () => void;
  const over = new Promise<void>((resolve) => (finish = resolve));
  const offDisconnected = c.on('disconnected', () => {
    send('failure', { message: 'the console lost its connection to the daemon; reconnecting' });
    finish();
  });
  void closed.then(finish);
  let follow: ChatFollow | null = null;
  try {
    follow = await followChat(
      c,
      { chatId },
      {
        batch: (b) => {
          if (pending) pending.push(b.records);
          else send('records', b.records);
        },
        break: (b) => {
          send('break', b);
          finish();
        },
        error: (e) => {
          send('failure', { message: e.error.message });
          finish();
        },
      },
    );
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
      pending.flat().filter((r) => !seen.has(key(r))),
    );
    pending = null;
    send('ready', {});
    await over;
  } catch (err) {
    send('failure', { message: (err as Error).message });
  } finally {
    offDisconnected();
    await follow?.unfollow();
  }
}
