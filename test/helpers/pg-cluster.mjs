// A throwaway PostgreSQL cluster for the tests and benches that need one (issue 24): initdb in a
// temp dir, the server listening on a Unix socket in that dir and on a random loopback port,
// fsync and synchronous commit on (a test of durability must not run on a server that lies).
// Plain ESM (types in pg-cluster.d.mts) so that bench/ scripts use the same cluster as the tests.
//
// PostgreSQL refuses to run as root. When the tests run as root (CI containers do), the cluster
// runs as the unprivileged `postgres` user that Debian's package creates; otherwise as the
// caller. `.ci/run` installs PostgreSQL from Debian when it is missing.
//
// `PgCluster.startPair()` starts a primary and a synchronous standby (streaming replication,
// `synchronous_standby_names`, `synchronous_commit = on`): a commit returns only once the
// standby has flushed it, so killing the primary and promoting the standby loses nothing that
// was acknowledged (issue 24 item 4).

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

  /** `host:port` over TCP on the loopback (for multi-host URLs, which cannot name sockets). */
  get hostPort() {
    return `127.0.0.1:${this.port}`;
  }

  /**
   * A handle on a cluster another process started (the run's cluster, test/helpers/run-pg.ts):
   * psql and URLs work, but it is not this handle's to stop or kill.
   */
  static async attach({ dir, port, user }) {
    const bin = pgBinDir();
    if (!bin) throw new Error('PostgreSQL server binaries not found under /usr/lib/postgresql (apt-get install postgresql)');
    const cluster = new PgCluster(dir, port, user, await unprivilegedUser(), bin);
    cluster.#attached = true;
    return cluster;
  }

  #attached = false;

  static async start(options = {}) {
    const cluster = await PgCluster.#make();
    try {
      await cluster.#exec('initdb', [
        '-D',
        cluster.#data,
        '-U',
        cluster.user,
        '--auth=trust',
        '--no-instructions',
        '-E',
        'UTF8',
        '--locale=C',
      ]);
      cluster.#configure([
        // Replication is ready on every cluster (it costs nothing unused), so that any of them
        // can be the primary of a pair.
        'wal_level = replica',
        'max_wal_senders = 10',
        'max_replication_slots = 10',
        'hot_standby = on',
        ...(options.config ?? []),
      ]);
      await cluster.#startServer();
      return cluster;
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  /**
   * A primary and a synchronous standby streaming from it (`synchronous_standby_names` names the
   * standby, `synchronous_commit = on`): a COMMIT on the primary returns once the standby has
   * flushed it. `url()` is a multi-host URL (primary first) with `target_session_attrs=read-write`.
   */
  static async startPair(options = {}) {
    const primary = await PgCluster.start(options);
    let standby;
    try {
      standby = await PgCluster.#make();
      const name = 'yello_standby';
      await standby.#exec('pg_basebackup', [
        '-D',
        standby.#data,
        '-h',
        primary.socketDir,
        '-p',
        String(primary.port),
        '-U',
        primary.user,
        '-X',
        'stream',
        '-c',
        'fast',
      ]);
      // The base backup copied the primary's postgresql.conf; ours come after it and win.
      standby.#configure([
        ...(options.config ?? []),
        `primary_conninfo = 'host=${primary.socketDir} port=${primary.port} user=${primary.user} application_name=${name}'`,
      ]);
      appendFileSync(path.join(standby.#data, 'standby.signal'), '');
      if (standby.#runAs) chownSync(path.join(standby.#data, 'standby.signal'), standby.#runAs.uid, standby.#runAs.gid);
      await standby.#startServer();
      await primary.psql(`alter system set synchronous_standby_names = '${name}'`);
      await primary.psql('select pg_reload_conf()');
      const deadline = Date.now() + 30_000;
      while ((await primary.psql(`select sync_state from pg_stat_replication where application_name = '${name}'`)) !== 'sync') {
        if (Date.now() > deadline) throw new Error('the standby did not become synchronous within 30 s');
        await new Promise((r) => setTimeout(r, 100));
      }
      return new PgPair(primary, standby);
    } catch (err) {
      await standby?.stop();
      await primary.stop();
      throw err;
    }
  }

  /**
   * Make this (stopped or killed) cluster a new standby of `primary`: its data dir is replaced
   * by a base backup of `primary`, it streams from it as `name`, and this returns once
   * `primary` reports it synchronous (when `primary` names it in `synchronous_standby_names`)
   * or streaming. What a failover does to the old primary before it can serve again (issue 24
   * item 4: the next cycle kills the new primary). The port stays the same, so a multi-host URL
   * still names both.
   */
  async rebuildAsStandbyOf(primary, name = 'yello_standby') {
    await this.kill('SIGKILL');
    rmSync(this.#data, { recursive: true, force: true });
    await this.#exec('pg_basebackup', [
      '-D',
      this.#data,
      '-h',
      primary.socketDir,
      '-p',
      String(primary.port),
      '-U',
      primary.user,
      '-X',
      'stream',
      '-c',
      'fast',
    ]);
    this.#configure([`primary_conninfo = 'host=${primary.socketDir} port=${primary.port} user=${primary.user} application_name=${name}'`]);
    appendFileSync(path.join(this.#data, 'standby.signal'), '');
    if (this.#runAs) chownSync(path.join(this.#data, 'standby.signal'), this.#runAs.uid, this.#runAs.gid);
    await this.#startServer();
    const deadline = Date.now() + 30_000;
    for (;;) {
      const state = await primary.psql(`select sync_state from pg_stat_replication where application_name = '${name}'`);
      const wanted = (await primary.psql('show synchronous_standby_names')) === '' ? 'async' : 'sync';
      if (state === wanted) return;
      if (Date.now() > deadline) throw new Error(`the rebuilt standby is not ${wanted} after 30 s (state "${state}")`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  static async #make() {
    const bin = pgBinDir();
    if (!bin) throw new Error('PostgreSQL server binaries not found under /usr/lib/postgresql (apt-get install postgresql)');
    const runAs = await unprivilegedUser();
    const dir = mkdtempSync('/tmp/yello-pg-');
    const port = await freePort();
    const user = runAs ? 'postgres' : userInfo().username;
    const cluster = new PgCluster(dir, port, user, runAs, bin);
    if (runAs) chownSync(dir, runAs.uid, runAs.gid);
    chmodSync(dir, 0o700);
    mkdirSync(cluster.socketDir, { mode: 0o700 });
    if (runAs) chownSync(cluster.socketDir, runAs.uid, runAs.gid);
    return cluster;
  }

  get #data() {
    return path.join(this.dir, 'data');
  }

  #configure(extra) {
    const conf = [
      `listen_addresses = '127.0.0.1'`,
      `port = ${this.port}`,
      `unix_socket_directories = '${this.socketDir}'`,
      'fsync = on',
      'synchronous_commit = on',
      'max_connections = 200',
      'shared_buffers = 64MB',
      ...extra,
    ];
    // Later lines win in postgresql.conf: ours come after initdb's defaults.
    appendFileSync(path.join(this.#data, 'postgresql.conf'), '\n' + conf.join('\n') + '\n');
  }

  /** Run one SQL command with psql over the socket; its output, trimmed (`-At`: bare values). */
  async psql(command, database = 'postgres') {
    const { stdout } = await this.#exec('psql', [
      '-h',
      this.socketDir,
      '-p',
      String(this.port),
      '-U',
      this.user,
      '-d',
      database,
      '-Atqc',
      command,
    ]);
    return stdout.trim();
  }

  /** Promote a standby to primary and wait until it accepts writes. */
  async promote() {
    await this.#exec('pg_ctl', ['promote', '-D', this.#data, '-w', '-t', '30']);
    const deadline = Date.now() + 30_000;
    while ((await this.psql('select pg_is_in_recovery()')) !== 'f') {
      if (Date.now() > deadline) throw new Error('the promoted standby still is in recovery after 30 s');
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /**
   * Kill the server with a signal (SIGKILL: a crash; the backends die with the postmaster, as
   * in a power cut, because the whole process group gets it) and wait until it is gone.
   */
  async kill(signal = 'SIGKILL') {
    const p = this.#proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', () => r()));
    process.kill(-p.pid, signal);
    await exited;
  }

  #serverLog = '';

  /** The server's stderr (its log) since start, the last megabyte: what tests count errors in. */
  get serverLog() {
    return this.#serverLog;
  }

  #exec(cmd, args) {
    return run(path.join(this.#bin, cmd), args, { uid: this.#runAs?.uid, gid: this.#runAs?.gid, cwd: this.dir });
  }

  async #startServer() {
    const proc = spawn(path.join(this.#bin, 'postgres'), ['-D', path.join(this.dir, 'data')], {
      uid: this.#runAs?.uid,
      gid: this.#runAs?.gid,
      cwd: this.dir,
      stdio: ['ignore', 'ignore', 'pipe'],
      // Its own process group, so that kill() reaches the backends too.
      detached: true,
    });
    this.#proc = proc;
    let log = '';
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (chunk) => {
      if (log.length < 20_000) log += chunk;
      this.#serverLog = (this.#serverLog + chunk).slice(-1_000_000);
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
    if (this.#attached) throw new Error('this cluster belongs to another process (PgCluster.attach): not stopped here');
    const p = this.#proc;
    this.#proc = undefined;
    if (p && p.exitCode === null && p.signalCode === null) {
      const exited = new Promise((r) => p.once('exit', () => r()));
      p.kill('SIGINT');
      const timer = setTimeout(() => process.kill(-p.pid, 'SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A primary with a synchronous standby (`PgCluster.startPair`). */
export class PgPair {
  constructor(primary, standby) {
    this.primary = primary;
    this.standby = standby;
  }

  /** A multi-host URL, primary first, that connects only to the one accepting writes. */
  url(database = 'postgres') {
    return `postgresql://${encodeURIComponent(this.primary.user)}@${this.primary.hostPort},${this.standby.hostPort}/${database}?target_session_attrs=read-write&sslmode=disable`;
  }

  async stop() {
    await this.standby.stop();
    await this.primary.stop();
  }
}
