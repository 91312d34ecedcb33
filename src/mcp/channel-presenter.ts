import {
  ConnectionLostError,
  ContinuityBreakError,
  Inbox,
  NotFollowedError,
  UnauthenticatedError,
  YelloClient,
  YelloClientError,
  type Chat,
  type MessageBatch,
} from '../client/index.js';
import { allPages, LIST_PAGE } from '../client/list-pages.js';
import { isAfter } from '../client/message-batch.js';
import { delay } from '../client/wait-queue.js';
import { Backoff } from '../shared/backoff.js';
import { streamSides } from '../shared/chat-peers.js';
import type { StreamState } from '../shared/types.js';
import type { AgentSessions } from './agent-sessions.js';
import { messageEvents, notFollowedEvent, replacedEvent, stoppedEvent, type ChannelEvent } from './channel-events.js';
import type { McpLog } from './log.js';
import { describeError } from './tool-errors.js';

/** How the channel coalesces: at most one round of pushes per `minIntervalMs`, each push at most `maxContentBytes`. */
export interface ChannelPacing {
  minIntervalMs: number;
  maxContentBytes: number;
}

/** 5 rounds a second: a quiet chat's first message goes out at once, a flood in a handful of events. */
export const DEFAULT_PACING: ChannelPacing = { minIntervalMs: 200, maxContentBytes: 32 * 1024 };
/** What one round takes from the inbox at most (the rest waits in the conversations for the next round). */
const ROUND_RECORDS = 5000;

/** Options of a {@link ChannelPresenter}. */
export interface ChannelPresenterOptions {
  token: string;
  socketPath: string;
  /** The server's sessions: its own writers' epochs, and where pushed batches are kept for acknowledging. */
  agent: AgentSessions;
  log: McpLog;
  /** Send one event to the MCP client; rejects when it could not be sent. */
  push(event: ChannelEvent): Promise<void>;
  callTimeoutMs?: number;
  reconnect?: { minDelayMs?: number; maxDelayMs?: number };
  pacing?: Partial<ChannelPacing>;
  /** The server runs with `--resume-after-break`: its tools present a broken chat from the generation's start; the channel does not. */
  resumeAfterBreak?: boolean;
}

/** A pause that ends early, without an error, once the presenter stops. */
const abortable = (ms: number, signal: AbortSignal) => delay(ms, signal).catch(() => {});

/**
 * The native adapter of `yello mcp --channel`: presents each new peer batch holding a message,
 * in every chat of the agent (chats opened later included), as a Claude Code channel event.
 *
 * It reads through the client library's {@link Inbox} (the one reader, with the one resume
 * policy, `'acknowledged'`) on a connection of its own: the Inbox of the tools keeps its own
 * state, so a push never takes a batch from read_new or wait_for_message, and the 63 chats of
 * one connection's subscriptions are not shared with them. A push writes nothing (reading and
 * `chats.get` only): no receipt, no claim. Each batch is pushed once per server session (the
 * Inbox hands each out once, reconnects included); after a restart, what is still
 * unacknowledged is pushed again.
 *
 * Before each push it checks, with the daemon, what a coordinator checks before presenting: that
 * no other process took the agent's stream in that chat since it began presenting it (the
 * stream's writer epoch is the one it found then, or one this server's own writers claimed), and
 * that the batch's generation is still the peer stream's current one. Replaced: one final
 * `replaced` event for that chat, then nothing more for it. A break or corrupt data: one final
 * `stopped` event saying what to do, as read_new would.
 */
export class ChannelPresenter {
  readonly #opts: ChannelPresenterOptions;
  readonly #pacing: ChannelPacing;
  readonly #abort = new AbortController();
  /** The agent's stream's writer epoch per chat when presenting began (a chat created later starts at "0"). */
  readonly #baseline = new Map<string, string>();
  /** Chats this presenter said its last word about (replaced, stopped). */
  readonly #ended = new Set<string>();
  #client: YelloClient | null = null;
  #inbox: Inbox | null = null;
  #loop: Promise<void> = Promise.resolve();
  #lastRound = 0;

  constructor(options: ChannelPresenterOptions) {
    this.#opts = options;
    this.#pacing = { ...DEFAULT_PACING, ...options.pacing };
  }

  /** A method, not a getter: it is asked again after awaits, where narrowing on a field would rule it out. */
  #isClosed(): boolean {
    return this.#abort.signal.aborted;
  }

  /** Start presenting (connecting, and dialling again while the daemon is not up yet). */
  start(): void {
    this.#loop = this.#run().catch((err: unknown) => {
      if (!this.#isClosed()) this.#opts.log.error({ err: err instanceof Error ? err.message : String(err) }, 'channel stopped');
    });
  }

  /** Stop presenting and close the channel's connection. */
  async close(): Promise<void> {
    this.#abort.abort();
    await this.#inbox?.close().catch(() => {});
    this.#client?.close();
    await this.#loop;
  }

  // ---- starting -------------------------------------------------------------------------

  async #run(): Promise<void> {
    const inbox = await this.#open();
    if (!inbox) return;
    this.#opts.log.info({ chats: inbox.chatIds.length }, 'channel presenting');
    for (;;) {
      const round = await this.#round(inbox);
      if (!round) return;
      const byChat = new Map<string, MessageBatch[]>();
      for (const { chatId, batch } of round.batches) byChat.set(chatId, [...(byChat.get(chatId) ?? []), batch]);
      for (const [chatId, batches] of byChat) await this.#present(chatId, batches);
      for (const err of round.failures) await this.#stopped(inbox, err);
      this.#lastRound = Date.now();
    }
  }

  /** The channel's own connection and Inbox, retried with backoff while the daemon cannot be reached. */
  async #open(): Promise<Inbox | null> {
    const backoff = new Backoff({ minDelayMs: 100, maxDelayMs: 5000, jitter: true });
    while (!this.#isClosed()) {
      let client: YelloClient | null = null;
      try {
        client = await YelloClient.connect({
          socketPath: this.#opts.socketPath,
          token: this.#opts.token,
          clientName: 'yello-mcp-channel',
          reconnect: this.#opts.reconnect ?? true,
          ...(this.#opts.callTimeoutMs !== undefined ? { callTimeoutMs: this.#opts.callTimeoutMs } : {}),
        });
        if (client.session.role !== 'agent') {
          client.close();
          return null; // the admin token: every tool says so
        }
        this.#client = client;
        if (this.#isClosed()) break;
        await this.#baselines(client);
        const inbox = await Inbox.open(client, { start: 'acknowledged' });
        this.#inbox = inbox;
        if (this.#isClosed()) break;
        return inbox;
      } catch (err) {
        client?.close();
        this.#client = null;
        if (err instanceof UnauthenticatedError) return null; // a refused token: every tool says so
        if (!(err instanceof ConnectionLostError || (err instanceof YelloClientError && err.transient))) throw err;
        this.#opts.log.debug({ err: err.message }, 'channel waiting for the daemon');
        await abortable(backoff.next()?.delayMs ?? 5000, this.#abort.signal);
      }
    }
    await this.#inbox?.close().catch(() => {});
    this.#client?.close();
    return null;
  }

  /** The writer epoch of the agent's stream in each chat, before following any: where "since presenting began" starts. */
  async #baselines(client: YelloClient): Promise<void> {
    const agentId = client.session.agentId;
    const chats = await allPages(
      (c) => client.call('chats.list', { limit: LIST_PAGE, ...c }),
      (p) => p.chats,
    );
    for (const chat of chats) {
      if (this.#baseline.has(chat.id)) continue;
      const { streams } = await client.call('chats.get', { chatId: chat.id });
      const { own } = streamSides(streams, agentId ?? '');
      this.#baseline.set(chat.id, own?.writer.epoch ?? '0');
    }
  }

  // ---- one round ------------------------------------------------------------------------

  /**
   * Wait for the next batch; then, no sooner than `minIntervalMs` after the last round, take
   * whatever else is there (coalescing a flood into few events). Failures of chats come after
   * the batches that preceded them. Null once closed.
   */
  async #round(inbox: Inbox): Promise<{ batches: Array<{ chatId: string; batch: MessageBatch }>; failures: Error[] } | null> {
    const batches: Array<{ chatId: string; batch: MessageBatch }> = [];
    const failures: Error[] = [];
    while (batches.length === 0) {
      try {
        const got = await inbox.wait({ signal: this.#abort.signal });
        if (!got) return null;
        batches.push(got);
      } catch (err) {
        if (this.#isClosed()) return null;
        await this.#stopped(inbox, err as Error);
      }
    }
    const pause = this.#lastRound + this.#pacing.minIntervalMs - Date.now();
    if (pause > 0) await abortable(pause, this.#abort.signal);
    let records = batches.reduce((n, b) => n + b.batch.records.length, 0);
    while (records < ROUND_RECORDS && !this.#isClosed()) {
      try {
        const got = await inbox.wait({ waitMs: 0 });
        if (!got) break;
        batches.push(got);
        records += got.batch.records.length;
      } catch (err) {
        failures.push(err as Error);
      }
    }
    return this.#isClosed() ? null : { batches, failures };
  }

  /** Push the new batches of one chat: checked, split into bounded events, each checked again before it goes. */
  async #present(chatId: string, batches: MessageBatch[]): Promise<void> {
    if (this.#ended.has(chatId) || this.#isClosed()) return;
    const state = await this.#state(chatId);
    if (!state || !(await this.#owns(chatId, state.own))) return;
    const acked = state.peer.acknowledged;
    // Acknowledged meanwhile (read_new, the CLI): shown already; of an old generation: the break follows.
    const fresh = batches.filter((b) => b.generation === state.peer.generation && (!acked || isAfter(b, acked)));
    if (fresh.length < batches.length)
      this.#opts.log.debug({ chatId, skipped: batches.length - fresh.length }, 'channel skipped acknowledged or stale batches');
    if (fresh.length === 0) return;
    const events = messageEvents(state.chat, state.own.authorAgentId, fresh, this.#pacing.maxContentBytes);
    for (const [i, event] of events.entries()) {
      // The first event was checked above; every later one is checked again before it goes.
      if (i > 0) {
        const again = await this.#state(chatId);
        if (!again || !(await this.#owns(chatId, again.own))) return;
        if (again.peer.generation !== event.meta.generation) return;
      }
      // Kept before the push, so that an acknowledge naming its batch_id finds it at once.
      this.#opts.agent.notePushed(chatId, fresh);
      await this.#send(event);
      this.#opts.log.debug(
        { chatId, first: event.meta.first_position, next: event.meta.next_position, messages: event.meta.messages },
        'channel pushed',
      );
    }
  }

  /** The chat and both its streams' states (the daemon's word), retried through a reconnect; null once closed. */
  async #state(chatId: string): Promise<{ chat: Chat; own: StreamState; peer: StreamState } | null> {
    const client = this.#client;
    const agentId = client?.session.agentId;
    const backoff = new Backoff({ minDelayMs: 50, maxDelayMs: 2000 });
    while (client && !this.#isClosed()) {
      try {
        const { chat, streams } = await client.call('chats.get', { chatId });
        const { own, peer } = streamSides(streams, agentId ?? '');
        if (!own || !peer) return null;
        return { chat, own, peer };
      } catch (err) {
        if (!(err instanceof ConnectionLostError || (err instanceof YelloClientError && err.transient))) throw err;
        await abortable(backoff.next()?.delayMs ?? 2000, this.#abort.signal);
      }
    }
    return null;
  }

  /**
   * Whether this server still presents for the agent in `chatId`: the stream's writer epoch is
   * the one found when presenting began, or one of this server's own claims. An epoch it does
   * not know yet may be its own claim whose answer is still on its way: it waits for the chat's
   * writes to settle and asks again. Otherwise it says so once, and the chat is done.
   */
  async #owns(chatId: string, own: StreamState): Promise<boolean> {
    const baseline = this.#baseline.get(chatId) ?? '0';
    const ours = (epoch: string) => epoch === baseline || this.#opts.agent.ownEpochs(chatId).has(epoch);
    if (ours(own.writer.epoch)) return true;
    await this.#opts.agent.writesSettled(chatId);
    const now = (await this.#state(chatId))?.own ?? own;
    if (ours(now.writer.epoch)) return true;
    this.#ended.add(chatId);
    this.#opts.log.warn({ chatId, epoch: now.writer.epoch, baseline }, 'channel replaced: another process took the stream');
    await this.#send(replacedEvent(chatId, now.streamId, now.writer, baseline));
    return false;
  }

  /** A chat's reading stopped for a person (or watching for new chats did): its last event. */
  async #stopped(inbox: Inbox, err: Error): Promise<void> {
    // Not a stop: the inbox follows the chat again by itself, and its batches are pushed then.
    if (err instanceof NotFollowedError)
      return this.#send(notFollowedEvent(err.chatId, describeError(err, { chatId: err.chatId, socketPath: this.#opts.socketPath })));
    const streamId = (err as { data?: { streamId?: unknown } }).data?.streamId;
    const chatId =
      inbox.chatIds.find((id) => inbox.conversation(id)?.failure === err) ??
      (typeof streamId === 'string' ? (streamId.split(':')[0] ?? null) : null);
    if (chatId && this.#ended.has(chatId)) return;
    if (chatId) this.#ended.add(chatId);
    let info = describeError(err, { ...(chatId ? { chatId } : {}), socketPath: this.#opts.socketPath });
    if (err instanceof ContinuityBreakError && this.#opts.resumeAfterBreak && chatId)
      info = {
        ...info,
        action: `This server runs with --resume-after-break, so read_new {chatId: "${chatId}"} presents this chat from the start of what the peer stream holds now (tell your user what may have been missed). The channel pushes nothing for it in this server session; once you have acknowledged there, a restart of the server pushes it again.`,
      };
    this.#opts.log.warn({ chatId, type: info.type }, 'channel stopped presenting a chat; a person must act');
    await this.#send(stoppedEvent(chatId, info));
  }

  async #send(event: ChannelEvent): Promise<void> {
    try {
      await this.#opts.push(event);
    } catch (err) {
      this.#opts.log.warn({ err: err instanceof Error ? err.message : String(err), event: event.meta.event }, 'channel event not sent');
    }
  }
}
