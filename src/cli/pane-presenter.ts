import type { Chat, NativeAdapter, PeerBatch, StreamState, YelloClient } from '../client/index.js';
import { CliError, EXIT } from './output.js';
import { paneText } from './pane-text.js';
import { delay } from '../client/wait-queue.js';
import type { TmuxPane } from './tmux-pane.js';
import type { WriterStore } from './writer-state.js';

/** The claim `yello attach` holds on the agent's stream in one chat (handed to the pane's CLI). */
export interface HeldStream {
  streamId: string;
  epoch: string;
  coordinatorToken: string;
}

/** Why presentation into the pane stopped for good: the line to print and the exit code. */
export class PaneStop extends CliError {
  constructor(
    message: string,
    exitCode: number,
    /** The pane itself is gone or changed: every chat stops, not only this one. */
    readonly paneGone = false,
  ) {
    super(message, exitCode);
  }
}

export interface PanePresenterOptions {
  pane: TmuxPane;
  /** attach's own connection, for the checks (`streams.get`, `streams.read`). */
  client: YelloClient;
  chat: Chat;
  /** Where the pane's CLI finds the kept claim, and its key. */
  store: WriterStore;
  socket: string;
  agentId: string;
  /** The yello command line the agent's shell runs, for the reply line. */
  cli: string;
  /** One line on stderr. */
  say: (line: string) => void;
  /** Aborted when attach stops: waits end. */
  signal: AbortSignal;
  /** How often a pause looks again. */
  pollMs?: number;
}

/** `p`, or the signal's reason once it aborts. */
function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const abort = () => {
      reject(signal.reason as Error);
    };
    if (signal.aborted) abort();
    signal.addEventListener('abort', abort, { once: true });
    p.then(resolve, reject).finally(() => {
      signal.removeEventListener('abort', abort);
    });
  });
}

/**
 * The Coordinator's native adapter for an agent in a tmux pane: types each peer batch into the
 * pane (framed as data, one bracketed paste, then Enter), never acknowledging. Before each
 * paste it checks, in this order, and waits or stops:
 * - an append of the pane's CLI under attach's claim has an unknown outcome (marked in the
 *   kept claim): wait until `yello ops show` settled it, as a Coordinator pauses;
 * - the pane runs the same process and the agent found at attach time is in its foreground:
 *   the process gone or replaced stops (every chat); another process in the foreground waits;
 * - the stream is still held under attach's claim (same epoch, active), and the batch's
 *   generation is the peer stream's current one: else it stops, saying who took the stream.
 */
export class PanePresenter implements NativeAdapter {
  readonly #o: PanePresenterOptions;
  readonly #held: Promise<HeldStream>;
  #resolveHeld!: (h: HeldStream) => void;
  #said = '';

  #cancelHeld!: (err: Error) => void;

  constructor(options: PanePresenterOptions) {
    this.#o = options;
    this.#held = new Promise((resolve, reject) => {
      this.#resolveHeld = resolve;
      this.#cancelHeld = reject;
    });
    this.#held.catch(() => {});
  }

  /** The claim is taken and handed over: presentation may begin. */
  claimed(held: HeldStream): void {
    this.#resolveHeld(held);
  }

  /** No claim will come (claiming failed): a presentation waiting for it ends, so the coordinator can stop. */
  cancel(err: Error): void {
    this.#cancelHeld(err);
  }

  async present(batch: PeerBatch): Promise<void> {
    const held = await abortable(this.#held, this.#o.signal);
    for (;;) {
      const wait = this.#uncertain(held) ?? (await this.#paneBusy());
      if (wait) {
        this.#sayOnce(wait);
        await delay(this.#o.pollMs ?? 250, this.#o.signal);
        continue;
      }
      await this.#stillHeld(held, batch);
      if (this.#said) this.#o.say(`chat ${this.#o.chat.id}: going on`);
      this.#said = '';
      await this.#o.pane.paste(paneText(batch, this.#o.chat, this.#o.cli));
      return;
    }
  }

  #sayOnce(line: string): void {
    if (line !== this.#said) this.#o.say(line);
    this.#said = line;
  }

  /** The pause an append of unknown outcome under attach's claim asks for, or null. */
  #uncertain(held: HeldStream): string | null {
    const kept = this.#o.store.load(this.#o.socket, this.#o.agentId, held.streamId);
    const op = kept?.coordinatorToken === held.coordinatorToken ? kept.uncertainOperationId : undefined;
    if (!op) return null;
    return `chat ${this.#o.chat.id}: paused: an append under this claim has an unknown outcome; \`yello ops show ${held.streamId} ${op}\` settles it, then presentation goes on`;
  }

  /** A wait while another process is in the pane's foreground, or null; a pane that is gone stops everything. */
  async #paneBusy(): Promise<string | null> {
    const check = await this.#o.pane.check();
    if (check.ok) return null;
    if (check.gone) throw paneGoneStop(check.why);
    return `paused: ${check.why}; typing goes on when it is back`;
  }

  /** Attach's claim still holds the stream, and the batch's generation is current; else stop. */
  async #stillHeld(held: HeldStream, batch: PeerBatch): Promise<void> {
    const { client, chat, pane } = this.#o;
    const own = await client.call('streams.get', { streamId: held.streamId });
    if (own.writer.epoch !== held.epoch || !own.writer.active) throw await replacedStop(client, held.streamId, chat.id, pane, own);
    const peer = await client.call('streams.get', { streamId: batch.streamId });
    if (peer.generation !== batch.generation) {
      throw new PaneStop(
        `${batch.streamId} was reset (generation ${batch.generation} → ${peer.generation}) after this batch arrived; ${nothingMore(pane, chat.id)}. See what changed with \`yello chats history ${chat.id} --all-generations\`, then attach again (with --from generation-start to be shown the new generation from its start)`,
        EXIT.continuity,
      );
    }
  }
}

/** The pane's process is gone or changed: every chat stops (exit 1). */
export function paneGoneStop(why: string): PaneStop {
  return new PaneStop(
    `${why}: the agent that was shown the messages is gone, so nothing more is typed. Start the agent again and attach again: what it has not acknowledged is typed again`,
    EXIT.error,
    true,
  );
}

const nothingMore = (pane: TmuxPane, chatId: string) => `nothing more is typed into tmux pane ${pane.identity.paneId} for chat ${chatId}`;

/** Attach's claim on `streamId` was taken or released: who has it now, and what to do (exit 4). */
export async function replacedStop(
  client: YelloClient,
  streamId: string,
  chatId: string,
  pane: TmuxPane,
  state?: StreamState,
): Promise<PaneStop> {
  const own = state ?? (await client.call('streams.get', { streamId }).catch(() => null));
  if (own && !own.writer.active) {
    return new PaneStop(
      `${streamId} was released (\`yello streams release\`, \`send --release\`, or a reset): attach holds it no more, and ${nothingMore(pane, chatId)}. Attach again to claim it`,
      EXIT.fenced,
    );
  }
  const who = own ? `epoch ${own.writer.epoch}${await claimedBy(client, own)}` : 'a later epoch';
  return new PaneStop(
    `${streamId} was claimed by another coordinator (${who}): it speaks for this agent now, and ${nothingMore(pane, chatId)}. Stop that one and attach again, or attach again with --replace to take the stream back (the other one is fenced)`,
    EXIT.fenced,
  );
}

/** ` at T, reason "R"` of the fence of the stream's current epoch, from its last records; '' when not found. */
async function claimedBy(client: YelloClient, own: StreamState): Promise<string> {
  try {
    const next = BigInt(own.nextPosition);
    const from = next - 32n > BigInt(own.firstPosition) ? next - 32n : BigInt(own.firstPosition);
    const page = await client.call('streams.read', {
      streamId: own.streamId,
      generation: own.generation,
      fromPosition: from.toString(),
      limit: 32,
    });
    const fence = page.records.findLast((r) => r.wrapper.type === 'chat.writer-fence' && r.wrapper.fence.epoch === own.writer.epoch);
    if (fence?.wrapper.type !== 'chat.writer-fence') return '';
    const { claimedAt, reason } = fence.wrapper.fence;
    return `, at ${claimedAt}${reason ? `, reason ${JSON.stringify(reason)}` : ''}`;
  } catch {
    return '';
  }
}
