// Failover under load through the PostgreSQL streams port (issue 24 item 4): a writer process
// appends to 8 streams with a synchronous standby; the primary is SIGKILLed and the standby
// promoted; every append the port acknowledged (outcome ok) is on the promoted standby, as its
// record and its operation. The writer stops at its first commit without a verdict (or dies:
// postgres.js 3.4.9 may crash then, see driver-connection-loss.test.ts); what it acknowledged
// before is what counts.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPool, resolveStoreUrl, type Sql } from '../../src/daemon/store/postgres/connection.js';
import { migrate } from '../../src/daemon/store/postgres/migrate.js';
import { PostgresStreams } from '../../src/daemon/store/postgres/stream-store.js';
import { newStreamMeta } from '../../src/daemon/store/stream-meta.js';
import { PgCluster, pgAvailable, type PgPair } from '../helpers/pg-cluster.mjs';

const child = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/port-writer-child.mjs');
const STREAMS = 8;
const T = '2026-12-02T03:00:00.000Z';

describe.runIf(pgAvailable())('PostgreSQL streams port: primary killed under load, standby promoted', () => {
  let pair: PgPair | undefined;
  const pools: Sql[] = [];
  beforeAll(async () => {
    pair = await PgCluster.startPair();
  }, 120_000);
  afterAll(async () => {
    for (const p of pools) await p.end({ timeout: 1 });
    await pair?.stop();
  });

  it('loses no acknowledged append', async () => {
    const url = pair!.url();
    const setup = openPool(resolveStoreUrl(url), { max: 1 });
    pools.push(setup);
    await migrate(setup);
    const port = await PostgresStreams.open(setup);
    for (let i = 0; i < STREAMS; i++)
      await port.createStreams([newStreamMeta(`c${i}`, 'alice', 'bob', T), newStreamMeta(`c${i}`, 'bob', 'alice', T)]);
    await port.close();

    const proc = spawn(process.execPath, [child, url, String(STREAMS)], { stdio: ['ignore', 'pipe', 'pipe'] });
    const acked: Array<[string, string]> = [];
    let buffer = '';
    proc.stdout.setEncoding('utf8');
    proc.stdout.on('data', (chunk: string) => {
      buffer += chunk;
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      for (const l of lines) {
        const [tag, streamId, op] = l.split(' ');
        if (tag === 'ack' && streamId && op) acked.push([streamId, op]);
      }
    });
    proc.stderr.resume();
    const exited = new Promise<void>((r) =>
      proc.once('exit', () => {
        r();
      }),
    );
    while (acked.length < 200 && proc.exitCode === null) await new Promise((r) => setTimeout(r, 20));
    expect(acked.length).toBeGreaterThanOrEqual(200);
    await pair!.primary.kill('SIGKILL');
    await pair!.standby.promote();
    await Promise.race([exited, new Promise((r) => setTimeout(r, 20_000))]);
    if (proc.exitCode === null) proc.kill('SIGKILL');
    await exited;

    const after = openPool(resolveStoreUrl(url), { max: 1 });
    pools.push(after);
    const rows = await after<{ stream_id: string; operation_id: string }[]>`
      select o.stream_id, o.operation_id from operations o
      join records r on r.stream_id = o.stream_id and r.generation = o.generation and r.position = o.first_position`;
    const present = new Set(rows.map((r) => `${r.stream_id} ${r.operation_id}`));
    const lost = acked.filter(([s, o]) => !present.has(`${s} ${o}`));
    expect(lost).toEqual([]);
    const [where] = await after<{ port: number }[]>`select inet_server_port() as port`;
    expect(where?.port).toBe(pair!.standby.port);
  }, 120_000);
});
