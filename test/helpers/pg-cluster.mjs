// A throwaway PostgreSQL cluster for the tests and benches that need one (issue 24): initdb in a
// temp dir, the server listening on a Unix socket in that dir and on a random loopback port,
// fsync and synchronous commit on (a test of durability must not run on a server that lies).
// Plain ESM (types in pg-cluster.d.mts) so that bench/ scripts use the same cluster as the tests.
//
// PostgreSQL refuses to run as root. When the tests run as root (CI containers do), the cluster
// runs as the unprivileged `postgres` user that Debian's package creates; otherwise as the
// caller. `.ci/run` installs PostgreSQL from Debian when it is missing.

import { execFile, spawn } from 'node:child_process';
import { appendFileSync, chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import { userInfo } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Where Debian puts the server binaries, newest major version first; null when not installed. */
export function pgBinDir() {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const majors = readdirSync(root)
    .filter((d) => /^\d+$/.test(d))
    .sort((a, b) => Number(b) - Number(a));
  for (const m of majors) {
    const bin = path.join(root, m, 'bin');
    if (existsSync(path.join(bin, 'postgres'))) return bin;
  }
  return null;
}

/**
 * Whether the PostgreSQL suites run here. On CI they must (`.ci/run` installs the server), so a
 * missing server fails there instead of skipping.
 */
export function pgAvailable() {
  return pgBinDir() !== null || Boolean(process.env.CI);
}

async function unprivilegedUser() {
  if (process.getuid?.() !== 0) return undefined;
  const { stdout: uid } = await run('id', ['-u', 'postgres']);
  const { stdout: gid } = await run('id', ['-g', 'postgres']);
  return { uid: Number(uid.trim()), gid: Number(gid.trim()) };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export class PgCluster {
  #proc;
  #runAs;
  #bin;

  constructor(dir, port, user, runAs, bin) {
    this.dir = dir;
    this.port = port;
    this.user = user;
    this.#runAs = runAs;
    this.#bin = bin;
  }

  get socketDir() {
    return path.join(this.dir, 'run');
  }

  url(database = 'postgres') {
    return `postgresql://${encodeURIComponent(this.user)}@/${database}?host=${encodeURIComponent(this.socketDir)}&port=${this.port}`;
  }

  connection(database = 'postgres') {
    return { host: this.socketDir, port: this.port, user: this.user, database };
  }

  get process() {
    return this.#proc;
  }

  static async start(options = {}) {
    const bin = pgBinDir();
    if (!bin) throw new Error('PostgreSQL server binaries not found under /usr/lib/postgresql (apt-get install postgresql)');
    const runAs = await unprivilegedUser();
    const dir = mkdtempSync('/tmp/yello-pg-');
    const data = path.join(dir, 'data');
    const sock = path.join(dir, 'run');
    const port = await freePort();
    const user = runAs ? 'postgres' : userInfo().username;
    const cluster = new PgCluster(dir, port, user, runAs, bin);
    try {
      if (runAs) chownSync(dir, runAs.uid, runAs.gid);
      chmodSync(dir, 0o700);
      await cluster.#exec('initdb', ['-D', data, '-U', user, '--auth=trust', '--no-instructions', '-E', 'UTF8', '--locale=C']);
      mkdirSync(sock, { mode: 0o700 });
      if (runAs) chownSync(sock, runAs.uid, runAs.gid);
      const conf = [
        `listen_addresses = '127.0.0.1'`,
        `port = ${port}`,
        `unix_socket_directories = '${sock}'`,
        'fsync = on',
        'synchronous_commit = on',
        'max_connections = 200',
        'shared_buffers = 64MB',
        ...(options.config ?? []),
      ];
      // Later lines win in postgresql.conf: ours come after initdb's defaults.
      appendFileSync(path.join(data, 'postgresql.conf'), '\n' + conf.join('\n') + '\n');
      await cluster.#startServer();
      return cluster;
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  async #exec(cmd, args) {
    await run(path.join(this.#bin, cmd), args, { uid: this.#runAs?.uid, gid: this.#runAs?.gid, cwd: this.dir });
  }

  async #startServer() {
    const proc = spawn(path.join(this.#bin, 'postgres'), ['-D', path.join(this.dir, 'data')], {
      uid: this.#runAs?.uid,
      gid: this.#runAs?.gid,
      cwd: this.dir,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    this.#proc = proc;
    let log = '';
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (chunk) => {
      if (log.length < 20_000) log += chunk;
    });
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`postgres exited ${proc.exitCode}: ${log}`);
      try {
        await run(path.join(this.#bin, 'pg_isready'), ['-h', this.socketDir, '-p', String(this.port), '-U', this.user, '-q']);
        return;
      } catch {
        if (Date.now() > deadline) throw new Error(`postgres did not become ready within 30 s: ${log}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  async stop() {
    const p = this.#proc;
    this.#proc = undefined;
    if (p && p.exitCode === null && p.signalCode === null) {
      const exited = new Promise((r) => p.once('exit', () => r()));
      p.kill('SIGINT');
      const timer = setTimeout(() => p.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
