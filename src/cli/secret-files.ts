import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  constants,
  createWriteStream,
  existsSync,
  fchmodSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
  type WriteStream,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { Io } from './io.js';
import { CliError, EXIT } from './output.js';

const EXCLUSIVE = constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW;

/** Open a new file that nobody else can have opened: O_EXCL (never an existing file or symlink), mode 0600. */
function openExclusive(path: string): number {
  const fd = openSync(path, EXCLUSIVE, 0o600);
  // The mode passed to open() is masked by the umask; the file must be 0600 whatever it is.
  fchmodSync(fd, 0o600);
  return fd;
}

function writeAllAndSync(fd: number, content: string): void {
  const bytes = Buffer.from(content, 'utf8');
  for (let off = 0; off < bytes.length;) off += writeSync(fd, bytes, off, bytes.length - off);
  fsyncSync(fd);
}

function syncDir(dir: string): void {
  let fd: number | null = null;
  try {
    fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
    fsyncSync(fd);
  } catch {
    /* best effort: some filesystems refuse fsync on a directory */
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

function tempPathBeside(path: string): string {
  return join(dirname(path), `.${basename(path)}.tmp-${process.pid}-${randomBytes(6).toString('hex')}`);
}

/**
 * Replace `path` atomically with a new 0600 file holding `content`: a temp file created O_EXCL
 * in the same directory, fsynced, renamed over `path`, then the directory fsynced. Readers see
 * the old file or the new one, and the new one is a fresh inode that only we ever opened.
 */
export function writeFileAtomic(path: string, content: string): void {
  const tmp = tempPathBeside(path);
  const fd = openExclusive(tmp);
  try {
    writeAllAndSync(fd, content);
  } catch (err) {
    closeSync(fd);
    unlinkSync(tmp);
    throw err;
  }
  closeSync(fd);
  try {
    renameSync(tmp, path);
  } catch (err) {
    try {
      unlinkSync(tmp);
    } catch {
      /* already gone */
    }
    throw err;
  }
  syncDir(dirname(path));
}

/**
 * Creates the missing directories above `path` (`--token-out ~/.config/yello/alice.token` on a
 * fresh machine) with mode 0700, whatever the umask: they hold secrets. Existing directories
 * are left as they are.
 */
function ensurePrivateParent(path: string, flag: string): void {
  const parent = dirname(resolve(path));
  if (existsSync(parent)) return;
  const missing: string[] = [];
  for (let dir = parent; !existsSync(dir); dir = dirname(dir)) missing.unshift(dir);
  try {
    mkdirSync(parent, { recursive: true, mode: 0o700 });
    for (const dir of missing) chmodSync(dir, 0o700);
  } catch (err) {
    throw new CliError(`cannot create the directory ${parent} for ${flag} ${path}: ${(err as Error).message}`, EXIT.usage);
  }
}

/**
 * A file reserved for a secret before the secret exists (`agents add --token-out`): the token
 * is shown once, so the file is claimed first and a refusal costs nothing. Without `force` the
 * path itself is created O_EXCL at 0600: a file someone else pre-created (and could read) is
 * refused. With `force` a temp file is reserved beside it and renamed over it on commit, so
 * whatever was there is replaced by a new inode instead of being written into.
 */
export class SecretFileSink {
  readonly #path: string;
  readonly #tmp: string | null;
  #fd: number | null;

  private constructor(path: string, fd: number, tmp: string | null) {
    this.#path = path;
    this.#fd = fd;
    this.#tmp = tmp;
  }

  /** Reserve `path` (usage error, exit 2, when it exists and `force` is not set). */
  static open(path: string, force: boolean, flag = '--token-out'): SecretFileSink {
    ensurePrivateParent(path, flag);
    try {
      if (!force) return new SecretFileSink(path, openExclusive(path), null);
      const tmp = tempPathBeside(path);
      return new SecretFileSink(path, openExclusive(tmp), tmp);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EEXIST')
        throw new CliError(
          `${flag} ${path} already exists; refusing to write a secret into a file that may not be yours (pass --force to replace it with a new file)`,
          EXIT.usage,
        );
      throw new CliError(`cannot create ${flag} ${path}: ${(err as Error).message}`, EXIT.usage);
    }
  }

  /** Write the secret, fsync, and (with force) rename it into place. */
  commit(content: string): void {
    const fd = this.#fd;
    if (fd === null) throw new Error('SecretFileSink.commit: the reservation was already committed or aborted');
    this.#fd = null;
    try {
      writeAllAndSync(fd, content);
    } finally {
      closeSync(fd);
    }
    if (this.#tmp) renameSync(this.#tmp, this.#path);
    syncDir(dirname(this.#path));
  }

  /** Give the reservation up (the secret was never made): remove what we created. */
  abort(): void {
    if (this.#fd === null) return;
    closeSync(this.#fd);
    this.#fd = null;
    try {
      unlinkSync(this.#tmp ?? this.#path);
    } catch {
      /* already gone */
    }
  }
}

/**
 * A file that a command writes as it goes (`chats export --out`), created like a secret file:
 * without `force` the path itself is created O_EXCL|O_NOFOLLOW at 0600, so an existing file or
 * a planted symlink is refused and never written into; with `force` a 0600 temp file beside it
 * is written and renamed over it on `commit`, replacing whatever was there (a symlink itself,
 * never its target) by a new inode. `abort` removes what was created.
 */
export class OutFile {
  readonly stream: WriteStream;
  readonly #path: string;
  readonly #tmp: string | null;
  readonly #fd: number;
  #done = false;

  private constructor(path: string, fd: number, tmp: string | null) {
    this.#path = path;
    this.#tmp = tmp;
    this.#fd = fd;
    this.stream = createWriteStream('', { fd, autoClose: false });
  }

  /** Create `path` (usage error, exit 2, when it exists and `force` is not set). */
  static open(path: string, force: boolean, flag = '--out'): OutFile {
    try {
      if (!force) return new OutFile(path, openExclusive(path), null);
      const tmp = tempPathBeside(path);
      return new OutFile(path, openExclusive(tmp), tmp);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EEXIST' || code === 'ELOOP')
        throw new CliError(
          `${flag} ${path} already exists; refusing to write into a file (or through a link) that may not be yours: choose a new path, or pass --force to replace it with a new file`,
          EXIT.usage,
        );
      throw new CliError(`cannot create ${flag} ${path}: ${(err as Error).message}`, EXIT.usage);
    }
  }

  /** Flush, fsync and close; with `force`, rename the temp file into place. */
  async commit(): Promise<void> {
    if (this.#done) return;
    this.#done = true;
    const fd = this.#fd;
    await new Promise<void>((resolve, reject) => {
      this.stream.end((err?: Error | null) => {
        if (err) reject(err);
        else resolve();
      });
    });
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    if (this.#tmp) renameSync(this.#tmp, this.#path);
    syncDir(dirname(this.#path));
  }

  /** Give up (the command failed before its output was complete): remove what was created. */
  abort(): void {
    if (this.#done) return;
    this.#done = true;
    // destroy() closes the fd (autoClose: false or not); a closeSync here as well closed it twice,
    // and the second close could hit a descriptor the process had opened again meanwhile.
    this.stream.destroy();
    try {
      unlinkSync(this.#tmp ?? this.#path);
    } catch {
      /* already gone */
    }
  }
}

/** A secret from a file, or from stdin for `-` (so it never appears on the command line). */
export async function readSecretFile(fileOrDash: string, flag: string, io: Pick<Io, 'readStdin'>): Promise<string> {
  let text: string;
  try {
    text = fileOrDash === '-' ? (await io.readStdin()).toString('utf8') : readFileSync(fileOrDash, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${flag} ${fileOrDash}: ${(err as Error).message}`, EXIT.usage);
  }
  const secret = text.trim();
  if (!secret) throw new CliError(`${flag} ${fileOrDash} is empty`, EXIT.usage);
  return secret;
}
