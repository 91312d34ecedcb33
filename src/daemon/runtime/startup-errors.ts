import { EXIT_CODES } from './exit-codes.js';
import { StartupError } from './startup-error.js';
import { YelloError } from '../../shared/errors.js';
import { StoreFormatError } from '../store/store-format-error.js';

/** errno codes and the phrase people know them by. */
const ERRNO: Record<string, { text: string; exit: number }> = {
  EACCES: { text: 'permission denied', exit: EXIT_CODES.permissionDenied },
  EPERM: { text: 'operation not permitted', exit: EXIT_CODES.permissionDenied },
  ENOSPC: { text: 'no space left on device', exit: EXIT_CODES.storageUnavailable },
  EDQUOT: { text: 'disk quota exceeded', exit: EXIT_CODES.storageUnavailable },
  EROFS: { text: 'read-only file system', exit: EXIT_CODES.storageUnavailable },
  EIO: { text: 'input/output error', exit: EXIT_CODES.storageUnavailable },
  ENOTDIR: { text: 'a path component is not a directory', exit: EXIT_CODES.config },
  ENAMETOOLONG: { text: 'file name too long', exit: EXIT_CODES.config },
  ELOOP: { text: 'too many symbolic links', exit: EXIT_CODES.config },
  EEXIST: { text: 'a file is in the way', exit: EXIT_CODES.config },
};

/** LevelDB reports OS errors inside its message text ("IO error: …: No space left on device"). */
const LEVELDB_TEXT: Array<[RegExp, string]> = [
  [/No space left on device/i, 'ENOSPC'],
  [/Disk quota exceeded/i, 'EDQUOT'],
  [/Read-only file system/i, 'EROFS'],
  [/Permission denied/i, 'EACCES'],
  [/Operation not permitted/i, 'EPERM'],
  [/Not a directory/i, 'ENOTDIR'],
  [/Input\/output error/i, 'EIO'],
];

/**
 * Turn what went wrong while starting into one line and a distinct exit code
 * (`yello: cannot open data dir /x: permission denied (EACCES)`): never a stack trace, and
 * never an exit code that makes systemd restart a daemon that cannot start.
 */
export function startupFailure(err: unknown, doing: string): StartupError {
  if (err instanceof StartupError) return err;
  if (err instanceof StoreFormatError)
    return new StartupError(`cannot ${doing}: ${err.message}`, err.corrupt ? EXIT_CODES.storeCorrupt : EXIT_CODES.config);
  const e = err as { code?: string; message?: string; cause?: { code?: string; message?: string } };
  const levelCode = e.cause?.code ?? e.code;
  if (levelCode === 'LEVEL_LOCKED') return new StartupError(`cannot ${doing}: it is locked by another daemon`, EXIT_CODES.storeLocked);
  if (levelCode === 'LEVEL_CORRUPTION') {
    return new StartupError(
      `cannot ${doing}: LevelDB reports corruption (${oneLine(e.cause?.message ?? e.message)}); run yello doctor, restore from a backup`,
      EXIT_CODES.storeCorrupt,
    );
  }
  // Damage found by the daemon's own checks while starting (a value failing its checksum), or
  // reported by LevelDB in a read's text ("Corruption: block checksum mismatch"), is a corrupt
  // store, not a failing filesystem: exit 76, which systemd does not restart.
  const corruptText = /\bCorruption:/.test(`${e.message ?? ''} ${e.cause?.message ?? ''}`);
  if ((err instanceof YelloError && err.details.reason === 'CORRUPT') || corruptText) {
    return new StartupError(
      `cannot ${doing}: stored data is corrupt (${oneLine(e.message)}); run yello doctor, restore from a backup`,
      EXIT_CODES.storeCorrupt,
    );
  }
  let errno = typeof e.code === 'string' && ERRNO[e.code] ? e.code : undefined;
  if (!errno) {
    const text = `${e.message ?? ''} ${e.cause?.message ?? ''}`;
    errno = LEVELDB_TEXT.find(([re]) => re.test(text))?.[1];
  }
  // Every errno found above is a key of ERRNO (a known code, or one from LEVELDB_TEXT).
  const known = errno === undefined ? undefined : ERRNO[errno];
  if (errno && known) return new StartupError(`cannot ${doing}: ${known.text} (${errno})`, known.exit);
  return new StartupError(`cannot ${doing}: ${oneLine(e.message ?? String(err))}`, EXIT_CODES.storageUnavailable);
}

function oneLine(text: string | undefined): string {
  return (text ?? '').replace(/\s+/g, ' ').trim();
}
