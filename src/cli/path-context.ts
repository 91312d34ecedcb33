import { homedir, userInfo } from 'node:os';
import type { PathContext } from '../shared/paths.js';

/** The facts that socket and data-dir resolution need: the run's environment, the process's ids. */
export function pathContext(env: Readonly<Record<string, string | undefined>>): PathContext {
  return { env, uid: process.getuid?.() ?? 0, home: homeDir(env), pid: process.pid };
}

/** `$HOME` of `env`, else the user's home from the password database (what os.homedir() does for the process). */
export function homeDir(env: Readonly<Record<string, string | undefined>>): string {
  if (env.HOME !== undefined) return env.HOME;
  try {
    return userInfo().homedir;
  } catch {
    return homedir();
  }
}
