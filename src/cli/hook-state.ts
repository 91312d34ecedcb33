import { createHash } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, readdirSync, readFileSync, statSync, unlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { writeFileAtomic } from './secret-files.js';

/** A position of a peer stream generation: everything before it was shown (or named) to the session. */
export interface Shown {
  generation: string;
  nextPosition: string;
}

/** What one agent session (Claude Code's or Codex's `session_id`) has been shown of each peer stream. */
export interface SessionShown {
  [peerStreamId: string]: Shown;
}

/** Session files untouched this long are removed (a session resumed later is simply shown its unread messages again). */
const STALE_MS = 14 * 24 * 3600 * 1000;

/**
 * Per-session memory of `yello hook`, so that a Stop never asks twice for the same messages:
 * one small JSON file per (socket, agent, agent kind, session) in the CLI's state dir (0700,
 * ours), written atomically. It holds positions only, never message content. Losing it costs
 * at most one more "new messages arrived" at a Stop.
 */
export class HookStateStore {
  readonly #dir: string;
  readonly #file: string;

  constructor(dir: string, key: { socket: string; agentId: string; agent: string; sessionId: string }) {
    this.#dir = dir;
    const hash = createHash('sha256')
      .update(`${resolve(key.socket)}\n${key.agentId}\n${key.agent}\n${key.sessionId}`)
      .digest('hex')
      .slice(0, 32);
    this.#file = join(dir, `hook-${hash}.json`);
  }

  /** What was shown, or nothing (no file yet, or one that is not ours). */
  load(): SessionShown {
    let text: string;
    try {
      text = readFileSync(this.#file, 'utf8');
    } catch {
      return {};
    }
    try {
      const v = JSON.parse(text) as { shown?: unknown };
      const shown: SessionShown = {};
      if (typeof v.shown === 'object' && v.shown !== null) {
        for (const [k, s] of Object.entries(v.shown as Record<string, Partial<Shown>>)) {
          if (typeof s.generation === 'string' && typeof s.nextPosition === 'string' && /^\d+$/.test(s.generation + s.nextPosition))
            shown[k] = { generation: s.generation, nextPosition: s.nextPosition };
        }
      }
      return shown;
    } catch {
      return {}; // a torn or foreign file: the next save replaces it
    }
  }

  save(shown: SessionShown): void {
    mkdirSync(this.#dir, { recursive: true, mode: 0o700 });
    const st = lstatSync(this.#dir);
    const uid = process.getuid?.();
    if (!st.isDirectory() || (uid !== undefined && st.uid !== uid))
      throw new Error(`the CLI state directory ${this.#dir} is not a directory of yours; pass --state-dir`);
    if ((st.mode & 0o077) !== 0) chmodSync(this.#dir, 0o700);
    writeFileAtomic(this.#file, JSON.stringify({ v: 1, shown }) + '\n');
  }

  /** Remove session files nobody touched for two weeks (best effort). */
  pruneStale(now = Date.now()): void {
    let names: string[];
    try {
      names = readdirSync(this.#dir);
    } catch {
      return;
    }
    for (const name of names) {
      if (!/^hook-[0-9a-f]{32}\.json$/.test(name)) continue;
      try {
        const path = join(this.#dir, name);
        if (now - statSync(path).mtimeMs > STALE_MS) unlinkSync(path);
      } catch {
        /* gone meanwhile */
      }
    }
  }
}
