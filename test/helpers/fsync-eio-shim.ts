// An LD_PRELOAD shim that makes fsync and fdatasync fail with EIO while the file named by
// $YELLO_FAULT_EIO_FILE exists: a real failed synced write, injected into a real daemon process
// (test/faults/fsync-eio.test.ts, read-only-keys.test.ts). It is compiled here with the
// machine's C compiler; without one the tests that need it are skipped.

import { execFileSync, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

const SHIM = `
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
static int failing(void) {
  const char *t = getenv("YELLO_FAULT_EIO_FILE");
  return t != NULL && access(t, F_OK) == 0;
}
int fsync(int fd) {
  static int (*real)(int) = NULL;
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  if (failing()) { errno = EIO; return -1; }
  return real(fd);
}
int fdatasync(int fd) {
  static int (*real)(int) = NULL;
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  if (failing()) { errno = EIO; return -1; }
  return real(fd);
}
`;

/** Whether a C compiler (`cc`) is there to build the shim. */
export const hasCc = spawnSync('cc', ['--version']).status === 0;

/** Compiles the shim into `dir` and returns the path of the shared object for LD_PRELOAD. */
export function buildFsyncEioShim(dir: string): string {
  writeFileSync(path.join(dir, 'eio.c'), SHIM);
  const shim = path.join(dir, 'eio.so');
  execFileSync('cc', ['-shared', '-fPIC', '-O2', '-o', shim, path.join(dir, 'eio.c'), '-ldl']);
  return shim;
}
