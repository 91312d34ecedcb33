import { homedir } from 'node:os';
import type { PathContext } from '../shared/paths.js';

/** The process facts that socket and data-dir resolution need. */
export function pathContext(): PathContext {
  return { env: process.env, uid: process.getuid?.() ?? 0, home: homedir(), pid: process.pid };
}
