import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  ContinuityBreakError,
  Coordinator,
  FencedError,
  FileCursorStore,
  WriterActiveError,
  YelloClientError,
  type Chat,
  type ConversationStart,
  type CursorStore,
  type YelloClient,
} from '../client/index.js';
import { breakError } from './break-advice.js';
import { CliError, errorMessage, EXIT } from './output.js';
import { PanePresenter, PaneStop, replacedStop, type HeldStream } from './pane-presenter.js';
import type { PaneIdentity, TmuxPane } from './tmux-pane.js';
import { WriterStore } from './writer-state.js';

export interface PaneAttachmentOptions {
  token: string;
  socket: string;
  stateDir: string;
  agentId: string;
  /** attach's own connection (reconnecting): checks and, for --inbox, chats.watch. */
  client: YelloClient;
  pane: TmuxPane;
  /** The yello command line the agent's shell runs, for the reply line. */
  cli: string;
  /** Take the stream over from a coordinator connected now (`--replace`). */
  replace: boolean;
  /** `--from`: where to start, ignoring where an earlier attach to the same agent process stopped. */
  from?: ConversationStart;
  say: (line: string) => void;
}

interface Attached {
  coordinator: Coordinator;
  held: HeldStream | null;
  /** Settles with why this chat stopped (null: stopped by attach itself). */
  ended: Promise<CliError | null>;
}

/**
 * Where the cursors of one agent process live: a file per (socket, agent, the process in the
 * pane's foreground, this boot). A restart of attach for the same process resumes after what
 * was typed; a new process (the agent restarted, another pane) starts from the agent's latest
 * receipt, so it is typed every message not yet acknowledged: the new process never saw them.
 */
export function cursorFile(stateDir: string, socket: string, agentId: string, pane: PaneIdentity): string {
  let boot = '';
  try {
    boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    /* pids and start times are then told apart within a boot only */
  }
  const key = createHash('sha256')
    .update([resolve(socket), agentId, boot, pane.agent.pid, pane.agent.startTime].join('\n'))
    .digest('hex')
    .slice(0, 32);
  return join(stateDir, 'attach', `cursors-${key}.json`);
}

/**
 * `yello attach --tmux`: one {@link Coordinator} per chat presenting into one pane through a
 * {@link PanePresenter}. Each coordinator claims the agent's stream at once and the token goes
 * into the CLI's kept-claim store, so the agent's own `yello send`/`yello ack` in the pane
 * append under attach's claim (no fence of their own, nothing replaced), while any other claim
 * is a replacement that stops that chat. The claim stays attached to attach's connection, so
 * the agent's other tools (`yello mcp`, `chats follow --ack`) do not take it over unasked
 * (`WRITER_ACTIVE`); `--replace` on their side does, and attach then stops and says so.
 */
export class PaneAttachment {
  readonly #o: PaneAttachmentOptions;
  readonly #chats = new Map<string, Attached>();
  readonly #abort = new AbortController();
  readonly #store: WriterStore;
  readonly #cursors: CursorStore;
  readonly #fresh = new Set<string>();
  #paneGone: ((stop: PaneStop) => void) | null = null;
  /** Resolves once the pane's process is gone or changed: every chat has stopped then. */
  readonly paneGone: Promise<PaneStop>;

  constructor(options: PaneAttachmentOptions) {
    this.#o = options;
    this.#store = new WriterStore(options.stateDir);
    const file = new FileCursorStore(cursorFile(options.stateDir, options.socket, options.agentId, options.pane.identity));
    // --from: a person's choice for this run, so a saved cursor of an earlier run is not used.
    this.#cursors = {
      load: (chatId) => (options.from && !this.#fresh.has(chatId) ? Promise.resolve(null) : file.load(chatId)),
      save: (chatId, cursor) => {
        this.#fresh.add(chatId);
        return file.save(chatId, cursor);
      },
    };
    this.paneGone = new Promise((r) => (this.#paneGone = r));
  }

  get chatIds(): string[] {
    return [...this.#chats.keys()];
  }

  /**
   * Start presenting `chat`: follow it, claim the stream, hand the claim over. Resolves with
   * `ended`, a promise of why it stopped (null: attach stopped it). Throws a CliError when it cannot start (the stream held by a
   * connected coordinator, a continuity break, the pane gone).
   */
  async attach(chat: Chat): Promise<{ ended: Promise<CliError | null> }> {
    const existing = this.#chats.get(chat.id);
    if (existing) return { ended: existing.ended };
    if (this.#abort.signal.aborted) return { ended: Promise.resolve(null) }; // a chat opened while stopping
    const { token, socket, client, pane, cli, say, agentId, replace, from } = this.#o;
    const presenter = new PanePresenter({ pane, client, chat, store: this.#store, socket, agentId, cli, say, signal: this.#abort.signal });
    const coordinator = new Coordinator({
      token,
      chatId: chat.id,
      socketPath: socket,
      adapter: presenter,
      cursorStore: this.#cursors,
      start: from ?? 'acknowledged',
      replace: replace ? true : 'if-abandoned',
      reason: `yello attach --tmux ${pane.identity.name}`,
      reconnect: {},
    });
    coordinator.on('unsettled', (u) => {
      say(
        `chat ${chat.id}: took the stream over from the claim of epoch ${u.previousEpoch} (${u.operations.length} append(s) committed under it since it was made)`,
      );
    });
    const entry: Attached = { coordinator, held: null, ended: Promise.resolve(null) };
    this.#chats.set(chat.id, entry);
    try {
      await coordinator.start();
      const { epoch, coordinatorToken } = await coordinator.claim();
      entry.held = { streamId: coordinator.streamId, epoch, coordinatorToken };
      this.#store.save({ socket, agentId, streamId: entry.held.streamId, coordinatorToken, epoch });
      presenter.claimed(entry.held);
    } catch (err) {
      this.#chats.delete(chat.id);
      presenter.cancel(err as Error);
      await coordinator.stop().catch(() => {});
      throw await this.#why(chat, entry, err);
    }
    entry.ended = coordinator.done.then(
      () => null,
      async (err: unknown) => {
        const why = await this.#why(chat, entry, err);
        await this.#end(entry);
        if (why instanceof PaneStop && why.paneGone) {
          this.#paneGone?.(why);
          await this.stop();
        }
        return why;
      },
    );
    return { ended: entry.ended };
  }

  /** A failure of one chat as one line for a person, with its exit code. */
  async #why(chat: Chat, entry: Attached, err: unknown): Promise<CliError> {
    const cause = err instanceof YelloClientError && err.type === 'ADAPTER_FAILED' ? err.cause : err;
    if (cause instanceof CliError) return cause;
    if (cause instanceof FencedError && entry.held) return replacedStop(this.#o.client, entry.held.streamId, chat.id, this.#o.pane);
    if (cause instanceof ContinuityBreakError) {
      const advice = breakError(cause, chat.id).message;
      return new CliError(`${advice}; then attach again with --from generation-start (or --from end)`, EXIT.continuity);
    }
    if (cause instanceof WriterActiveError) {
      return new CliError(
        `chat ${chat.id}: the agent's stream is held by another process of this agent connected right now (epoch ${String(cause.data.epoch)}: \`yello mcp\`, \`chats follow --ack\` or another attach); nothing is typed for this chat. Stop it and attach again, or pass --replace to take the stream over (the other one is fenced)`,
        EXIT.error,
      );
    }
    return new CliError(`chat ${chat.id} stopped: ${errorMessage(cause)}`, EXIT.error);
  }

  /** Forget the kept claim if it is still attach's (a fenced or released token is of no use to the pane's CLI). */
  #forget(entry: Attached): void {
    const held = entry.held;
    if (!held) return;
    const kept = this.#store.load(this.#o.socket, this.#o.agentId, held.streamId);
    if (kept?.coordinatorToken === held.coordinatorToken && !kept.uncertainOperationId)
      this.#store.delete(this.#o.socket, this.#o.agentId, held.streamId);
  }

  async #end(entry: Attached): Promise<void> {
    await entry.coordinator.stop().catch(() => {});
    this.#forget(entry);
  }

  /** Stop every chat: waits end, each claim is released (unless it was taken), the kept claims forgotten. */
  async stop(): Promise<void> {
    this.#abort.abort(new CliError('yello attach stopped'));
    await Promise.all([...this.#chats.values()].map((e) => this.#end(e)));
  }
}
