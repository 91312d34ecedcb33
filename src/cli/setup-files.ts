import { createHash } from 'node:crypto';
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, realpathSync, rmdirSync, statSync, unlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { CliError, EXIT } from './output.js';
import { writeFileAtomic } from './secret-files.js';

/** One configuration file as setup found it and as it leaves it (`after` null: remove the file). */
export interface PlannedFile {
  path: string;
  before: string | null;
  after: string | null;
  changes: string[];
  /** A file of the user's own configuration (0600, private directories) rather than a project's (0644). */
  privateFile: boolean;
}

export const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** The file's text, or null when there is none. */
export function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new CliError(`cannot read ${path}: ${(err as Error).message}`, EXIT.error);
  }
}

/** Through a symlink (a dotfiles manager's ~/.claude.json, say) to the file itself, so the link stays a link. */
function target(path: string): string {
  try {
    return lstatSync(path).isSymbolicLink() ? realpathSync(path) : path;
  } catch {
    return path;
  }
}

/** The directories above `path` that do not exist yet, outermost first. */
function missingDirs(path: string): string[] {
  const missing: string[] = [];
  for (let d = dirname(path); !existsSync(d); d = dirname(d)) missing.unshift(d);
  return missing;
}

/**
 * Writes the plan: each file replaced atomically (a temp file beside it, renamed over it),
 * keeping its mode, or created with 0600 (user configuration) / 0644 (project files); a file to
 * remove is unlinked. Returns the directories it created, so that a removal can take them out.
 */
export function writePlan(files: PlannedFile[]): string[] {
  const created: string[] = [];
  for (const f of files) {
    const path = target(f.path);
    if (f.after === null) {
      if (f.before !== null) unlinkSync(path);
      continue;
    }
    const dirs = missingDirs(path);
    if (dirs.length > 0) {
      mkdirSync(dirname(path), { recursive: true, mode: f.privateFile ? 0o700 : 0o755 });
      created.push(...dirs);
    }
    const mode = f.before !== null ? statSync(path).mode & 0o7777 : f.privateFile ? 0o600 : 0o644;
    writeFileAtomic(path, f.after);
    chmodSync(path, mode);
  }
  return created;
}

/** Removes the directories setup created, innermost first, as long as they are empty. */
export function removeEmptyDirs(dirs: string[]): string[] {
  const removed: string[] = [];
  for (const d of [...dirs].sort((a, b) => b.length - a.length)) {
    try {
      rmdirSync(d);
      removed.push(d);
    } catch {
      /* not empty, or gone: left as it is */
    }
  }
  return removed;
}

/** What one file was before setup first touched it, and what setup left in it. */
export interface ManifestFile {
  before: string | null;
  afterSha256: string;
}

/** What `yello setup` did for one agent, kind and scope: enough for `--remove` to put every byte back. */
export interface Manifest {
  v: 1;
  files: Record<string, ManifestFile>;
  createdDirs: string[];
}

/**
 * The record of a setup, kept in the CLI's state dir (0700; the files are 0600, since they
 * hold the configuration files' earlier text). With it `--remove` restores a file byte for byte
 * when nothing else changed it since; without it (or after another program edited the file)
 * removal takes out exactly the entries setup adds and leaves the rest as it is.
 */
export class SetupManifest {
  readonly #dir: string;
  readonly #file: string;

  constructor(stateDir: string, key: string) {
    this.#dir = stateDir;
    this.#file = join(stateDir, `setup-${sha256(key).slice(0, 32)}.json`);
  }

  load(): Manifest | null {
    const text = readText(this.#file);
    if (text === null) return null;
    try {
      const m = JSON.parse(text) as Partial<Manifest>;
      return m.v === 1 && typeof m.files === 'object' && Array.isArray(m.createdDirs) ? (m as Manifest) : null;
    } catch {
      return null;
    }
  }

  /** Records the written plan: a file's first `before` is kept across repeated setups. */
  record(files: PlannedFile[], createdDirs: string[]): void {
    const m = this.load() ?? { v: 1, files: {}, createdDirs: [] };
    for (const f of files) {
      if (f.after === null) continue;
      const known = m.files[f.path];
      m.files[f.path] = { before: known ? known.before : f.before, afterSha256: sha256(f.after) };
    }
    m.createdDirs = [...new Set([...m.createdDirs, ...createdDirs])];
    mkdirSync(this.#dir, { recursive: true, mode: 0o700 });
    writeFileAtomic(this.#file, JSON.stringify(m) + '\n');
  }

  delete(): void {
    try {
      unlinkSync(this.#file);
    } catch {
      /* none */
    }
  }
}
