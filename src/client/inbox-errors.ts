import { YelloClientError } from './errors.js';

/**
 * An {@link Inbox} does not follow a chat, because the daemon refused it the connection to
 * follow it on (`cause`: a session limit of the agent, say; each connection holds at most 64
 * subscriptions). Transient: the inbox tries again at `list()`, after a reconnect and on a
 * backoff of its own. Its message names the chat and what a person can do.
 */
export class NotFollowedError extends YelloClientError {
  declare readonly type: 'NOT_FOLLOWED';
  constructor(
    readonly chatId: string,
    cause: Error,
  ) {
    super(
      'NOT_FOLLOWED',
      `chat ${chatId} is not followed: the inbox needs another connection to the daemon for it (64 subscriptions per connection) and did not get one (${cause.message}). Close other sessions of this agent or raise the daemon's --max-sessions-per-agent; the inbox tries again by itself`,
      { cause, transient: true },
    );
  }
}
