import { createHash } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, readFileSync, unlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { CliError, EXIT } from './output.js';
import { homeDir } from './path-context.js';
import { writeFileAtomic } from './secret-files.js';

/**
 * The CLI's own directory for state that outlives one command: `--state-dir`, else
 * `$XDG_STATE_HOME/yello-cli`, else `~/.local/state/yello-cli`.
 */
export function cliStateDir(flag: string | undefined, env: Readonly<Record<string, string | undefined>>): string {
  if (flag) return resolve(flag);
  if (env.XDG_STATE_HOME) return join(env.XDG_STATE_HOME, 'yello-cli');
  return join(homeDir(env), '.local', 'state', 'yello-cli');
}

/** A claim the CLI holds on one stream, kept between commands. */
export interface HeldClaim {
  socket: string;
  agentId: string;
  streamId: string;
  coordinatorToken: string;
  epoch: string;
  /**
   * An append under this claim whose answer was lost: nothing more is sent under it, and
   * `yello attach` types nothing more into its pane, until `yello ops show` settled it.
   */
  uncertainOperationId?: string;
}

/**
 * Coordinator tokens the CLI keeps so that `send` and `ack` act as one long-lived writer per
 * (socket, agent, stream) instead of claiming — and leaving a writer fence in the stream —
 * at every command. A kept claim has no process behind it between commands, so the daemon
 * reports it abandoned and the agent's other tools take it over (see CliWriter). One 0600 file
 * per key in a 0700 directory that must be ours.
 */
export class WriterStore {
  readonly #dir: string;

  constructor(dir: string) {
    this.#dir = dir;
  }

  #ensureDir(): void {
    mkdirSync(this.#dir, { recursive: true, mode: 0o700 });
    const st = lstatSync(this.#dir);
    const uid = process.getuid?.();
    if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) {
      throw new CliError(`the CLI state directory ${this.#dir} is not a directory of yours; pass --state-dir`, EXIT.error);
    }
    if ((st.mode & 0o077) !== 0) chmodSync(this.#dir, 0o700);
  }

  #file(socket: string, agentId: string, streamId: string): string {
    const key = createHash('sha256')
      .update(`${resolve(socket)}\n${agentId}\n${streamId}`)
      .digest('hex')
      .slice(0, 32);
    return join(this.#dir, `writer-${key}.json`);
  }

  /** The stored claim, or null (none, or a file that is not a claim for this key). */
  load(socket: string, agentId: string, streamId: string): HeldClaim | null {
    let text: string;
    try {
      text = readFileSync(this.#file(socket, agentId, streamId), 'utf8');
    } catch (err) {
      // No claim kept, or no usable state dir (the writer then claims for one command only).
      if (['ENOENT', 'ENOTDIR', 'EACCES'].includes((err as NodeJS.ErrnoException).code ?? '')) return null;
      throw new CliError(`cannot read the CLI state in ${this.#dir}: ${(err as Error).message}`, EXIT.error);
    }
    try {
      const v = JSON.parse(text) as Partial<HeldClaim>;
      if (
        v.socket === resolve(socket) &&
        v.agentId === agentId &&
        v.streamId === streamId &&
        typeof v.coordinatorToken === 'string' &&
        typeof v.epoch === 'string' &&
        (v.uncertainOperationId === undefined || typeof v.uncertainOperationId === 'string')
      ) {
        return v as HeldClaim;
      }
    } catch {
      /* a torn or foreign file: treat as no claim; the next save replaces it */
    }
    return null;
  }

  save(claim: HeldClaim): void {
    this.#ensureDir();
    writeFileAtomic(
      this.#file(claim.socket, claim.agentId, claim.streamId),
      JSON.stringify({ ...claim, socket: resolve(claim.socket) }) + '\n',
    );
  }

  /**
   * `operationId`'s outcome is known now (`yello ops show` asked the daemon): the claim kept for
   * the stream is no longer paused by it. True when it was.
   */
  settle(socket: string, agentId: string, streamId: string, operationId: string): boolean {
    const claim = this.load(socket, agentId, streamId);
    if (claim?.uncertainOperationId !== operationId) return false;
    this.save({
      socket: claim.socket,
      agentId: claim.agentId,
      streamId: claim.streamId,
      coordinatorToken: claim.coordinatorToken,
      epoch: claim.epoch,
    });
    return true;
  }

  delete(socket: string, agentId: string, streamId: string): void {
    try {
      unlinkSync(this.#file(socket, agentId, streamId));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
}
