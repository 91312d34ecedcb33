import { mkdirSync, chmodSync, openSync, writeSync, fsyncSync, closeSync, renameSync, readFileSync, existsSync } from 'node:fs';
import { dirname } from 'node:path';

/** Create a directory (and parents) and force its mode, whatever the umask. */
export function ensureDir(path: string, mode: number): void {
  mkdirSync(path, { recursive: true, mode });
  chmodSync(path, mode);
}

/** fsync a directory so a rename or create inside it survives a crash. */
export function fsyncDir(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Write a file atomically (temp + fsync + rename + dir fsync) with `mode`. */
export function writeFileDurable(path: string, content: string, mode = 0o600): void {
  const tmp = `${path}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w', mode);
  try {
    writeSync(fd, content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  chmodSync(tmp, mode);
  renameSync(tmp, path);
  fsyncDir(dirname(path));
}

/** Read a small text file, or create it durably with `make()` on first use. */
export function readOrCreate(path: string, make: () => string, mode = 0o600): string {
  if (existsSync(path)) {
    chmodSync(path, mode);
    return readFileSync(path, 'utf8').trim();
  }
  const value = make();
  writeFileDurable(path, value + '\n', mode);
  return value;
}
