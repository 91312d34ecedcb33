import { readFileSync, statSync, type Stats } from 'node:fs';
import { createRequire } from 'node:module';
import { userInfo } from 'node:os';
import { dirname, resolve } from 'node:path';

/** The first part of a socket path this process may not pass: a directory it cannot enter, or the socket it cannot write. */
interface Blocker {
  path: string;
  stat: Stats;
  kind: 'directory' | 'socket';
}

/**
 * Why connecting to `socketPath` was refused (EACCES), and what to do, from the modes, owners
 * and groups on the way to it: "add yourself to group G, then log in again", "log in again"
 * when the account is in G but this session is not yet, or "ask for --socket-mode 0660" when
 * not even the group may pass. Null when no part of the path refuses this process by its modes
 * (root, ACLs, a path that changed meanwhile): the caller then says it generally.
 */
export function socketAccessAdvice(socketPath: string): string | null {
  const uid = process.geteuid?.();
  if (uid === undefined || uid === 0) return null;
  const gids = new Set([process.getegid?.() ?? -1, ...(process.getgroups?.() ?? [])]);
  const blocker = firstBlocker(resolve(socketPath), uid, gids);
  if (!blocker) return null;
  const { path, stat, kind } = blocker;
  const bit = kind === 'directory' ? 0o1 : 0o2;
  const group = groupName(stat.gid);
  const what = `${kind === 'directory' ? 'the directory' : 'the socket'} ${path} (mode ${(stat.mode & 0o7777).toString(8).padStart(4, '0')}, owner ${userName(stat.uid)}, group ${group})`;
  const me = account();
  if (stat.mode & (bit << 3)) {
    if (me.gid === stat.gid || groupMembers(stat.gid).includes(me.name)) {
      return `permission denied by ${what}: your account ${me.name} is in group ${group}, but this login session is not yet; log in again (or run \`newgrp ${group}\`)`;
    }
    return `permission denied by ${what}: ${me.name} is not in group ${group}; add yourself (sudo usermod -aG ${group} ${me.name}), then log in again`;
  }
  return `permission denied by ${what}: not even its group may ${kind === 'directory' ? 'enter it' : 'connect'}; ask whoever runs the daemon for a group-accessible socket (yello daemon --socket-mode 0660, a socket directory of mode 0750 with your group), or run your own daemon with --socket`;
}

/** Walks from `/` to the socket: every directory needs search (x), the socket write (w). */
function firstBlocker(socketPath: string, uid: number, gids: Set<number>): Blocker | null {
  const dirs: string[] = [];
  for (let d = dirname(socketPath); ; d = dirname(d)) {
    dirs.unshift(d);
    if (dirname(d) === d) break;
  }
  const parts: Array<[string, 'directory' | 'socket']> = [
    ...dirs.map((d): [string, 'directory'] => [d, 'directory']),
    [socketPath, 'socket'],
  ];
  for (const [path, kind] of parts) {
    let stat: Stats;
    try {
      stat = statSync(path);
    } catch {
      return null;
    }
    const bit = kind === 'directory' ? 0o1 : 0o2;
    const shift = stat.uid === uid ? 6 : gids.has(stat.gid) ? 3 : 0;
    if ((stat.mode & (bit << shift)) === 0) return { path, stat, kind };
  }
  return null;
}

function account(): { name: string; gid: number } {
  try {
    const me = userInfo();
    return { name: me.username, gid: me.gid };
  } catch {
    return { name: `uid ${String(process.geteuid?.() ?? '?')}`, gid: -1 };
  }
}

/** `getent` consults every account source (NSS: files, LDAP, …); /etc is the fallback. */
function lookup(db: 'group' | 'passwd', id: number): string[] | null {
  let line: string | undefined;
  try {
    // Loaded here, for the one failure that asks: every command's error path imports this module.
    const { execFileSync } = createRequire(import.meta.url)('node:child_process') as typeof import('node:child_process');
    line = execFileSync('getent', [db, String(id)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 2000 }).split(
      '\n',
    )[0];
  } catch {
    try {
      line = readFileSync(`/etc/${db}`, 'utf8')
        .split('\n')
        .find((l) => l.split(':')[2] === String(id));
    } catch {
      line = undefined;
    }
  }
  return line ? line.split(':') : null;
}

function groupName(gid: number): string {
  return lookup('group', gid)?.[0] ?? String(gid);
}

function groupMembers(gid: number): string[] {
  return (lookup('group', gid)?.[3] ?? '').split(',').filter((m) => m !== '');
}

function userName(uid: number): string {
  return lookup('passwd', uid)?.[0] ?? String(uid);
}
