import type { ParamsIn } from '../shared/methods.js';
import type { ChatBatchNotification, ChatBreakNotification, ChatErrorNotification } from '../shared/types.js';
import type { YelloClient } from './yello-client.js';

/** What a subscription hears: each in the order the daemon sent it, only its own. */
export interface FollowHandlers {
  batch(b: ChatBatchNotification): void;
  /** The subscription ended on a continuity break. */
  break(b: ChatBreakNotification): void;
  /** The subscription ended on an error (a corrupt stream, say). */
  error(e: ChatErrorNotification): void;
  /** The follow was answered: called before any of its notifications (those held included) is handed on. */
  answered?(answer: { subscriptionId: string; cursor: string }): void;
}

/** A running `chats.follow`. */
export interface ChatFollow {
  readonly subscriptionId: string;
  /** The cursor the daemon answered: where the subscription began. */
  readonly cursor: string;
  /** Stop hearing it (the listeners go; the daemon keeps the subscription until `unfollow` or the connection ends). */
  close(): void;
  /** `close()`, and `chats.unfollow` when the connection is still up. */
  unfollow(): Promise<void>;
}

type Early =
  { kind: 'batch'; n: ChatBatchNotification } | { kind: 'break'; n: ChatBreakNotification } | { kind: 'error'; n: ChatErrorNotification };

/**
 * `chats.follow` with its notifications routed to `handlers`: the one way a reader subscribes.
 * The daemon may send a subscription's first batches in the same socket read as the follow's
 * answer, so they are dispatched before the caller has the subscription id; they are held from
 * before the call and replayed, in order, once the answer names the subscription. A reader that
 * matched ids only after the answer dropped them, and a re-follow from its cursor then moved past
 * them: a silent skip.
 */
export async function followChat(client: YelloClient, params: ParamsIn<'chats.follow'>, handlers: FollowHandlers): Promise<ChatFollow> {
  let id: string | null = null;
  let early: Early[] | null = [];
  const route = (e: Early): void => {
    if (early) early.push(e);
    else if (e.n.subscriptionId === id) {
      if (e.kind === 'batch') handlers.batch(e.n);
      else if (e.kind === 'break') handlers.break(e.n);
      else handlers.error(e.n);
    }
  };
  const offs = [
    client.on('chats.batch', (n) => {
      route({ kind: 'batch', n });
    }),
    client.on('chats.break', (n) => {
      route({ kind: 'break', n });
    }),
    client.on('chats.error', (n) => {
      route({ kind: 'error', n });
    }),
  ];
  const close = (): void => {
    for (const off of offs.splice(0)) off();
  };
  let answer: { subscriptionId: string; cursor: string };
  try {
    answer = await client.call('chats.follow', params);
  } catch (err) {
    close();
    throw err;
  }
  id = answer.subscriptionId;
  handlers.answered?.(answer);
  const held = early;
  early = null;
  for (const e of held) route(e);
  return {
    subscriptionId: answer.subscriptionId,
    cursor: answer.cursor,
    close,
    unfollow: async () => {
      close();
      if (client.connected) await client.call('chats.unfollow', { subscriptionId: answer.subscriptionId }).catch(() => undefined);
    },
  };
}
