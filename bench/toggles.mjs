// Features bench/ab.mjs can switch off in a scratch copy of one side's build, to measure what
// each costs apart (issue 54): BENCH_AB_B_OFF=metrics,claim-attach with BENCH_AB_DIR=. runs this
// build as A and the same build without those features as B, so B/A is what the feature costs.
// Each toggle rewrites dist/ JavaScript of the copy (never src/, never the checkout itself) and
// fails loudly when its text is not in that build. They remove guarantees: measurement only.

import { cpSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** name → [{ file under dist/, find (string or RegExp), replace }] */
export const TOGGLES = {
  metrics: {
    what: 'the Prometheus counters and histograms of appends and commits',
    patches: [
      { file: 'daemon/rpc/rpc-methods.js', find: /s\.metrics\.appended\([^;]*\);/, replace: ';' },
      { file: 'daemon/daemon.js', find: 'metrics.committed(writes, seconds);', replace: ';' },
    ],
  },
  'quota-bytes': {
    what: "the append's quota bytes (counted as 0)",
    patches: [
      {
        file: 'daemon/rpc/rpc-methods.js',
        find: /const bytes = agentId === null \? 0 : [^;]*;/,
        replace: 'const bytes = 0;',
      },
    ],
  },
  'output-pool': {
    what: 'the daemon-wide output budget (connections get no pool)',
    patches: [{ file: 'daemon/rpc/socket-server.js', find: 'pool: opts.pool,', replace: 'pool: undefined,' }],
  },
  'claim-attach': {
    what: 'attaching the appending connection to its claim (writer presence)',
    patches: [
      { file: 'daemon/streams/appender.js', find: 'this.#presence.attach(p.streamId, meta.writer.tokenHash, holder);', replace: ';' },
    ],
  },
  'session-check': {
    what: "the per-call session check (issue 52: a rotated token or a disabled agent's session refused; on PostgreSQL a read of the revocation columns)",
    patches: [{ file: 'daemon/rpc/rpc-server.js', find: 'const valid = this.#sessionValid(caller);', replace: 'const valid = true;' }],
  },
  // Store-side experiments (issue 54: what fewer keys or cheaper values per append would buy,
  // measured before the store is restructured). They break the store: scratch runs only.
  'store-oplog-key': {
    what: 'EXPERIMENT: the operation-log key of each append (LevelDB)',
    patches: [
      {
        file: 'daemon/store/leveldb/level-streams.js',
        find: "ops.push({ type: 'put', key: K.opLog(streamId, operation.generation, operation.firstPosition), value: operation.operationId });",
        replace: ';',
      },
    ],
  },
  'store-messageid-key': {
    what: 'EXPERIMENT: the message-id index key of each message (LevelDB; the negative index still answers in memory)',
    patches: [
      {
        file: 'daemon/store/leveldb/level-streams.js',
        find: "ops.push({ type: 'put', key: K.messageId(streamId, operation.generation, id), value: formatDecimal(position) });",
        replace: ';',
      },
    ],
  },
  'store-crc': {
    what: 'EXPERIMENT: the CRC-32 of every stored value (written as 00000000; nothing can be read back after a restart)',
    patches: [{ file: 'daemon/store/value-codec.js', find: 'return checksum(key, json) + json;', replace: "return '00000000' + json;" }],
  },
};

/**
 * A scratch copy of `checkout` (its dist/ and bin/, node_modules and package.json linked) with
 * the toggles `names` applied; returns its directory.
 */
export function toggledCopy(checkout, names, tmpBase = os.tmpdir()) {
  const dir = mkdtempSync(path.join(tmpBase, 'ybtoggle-'));
  cpSync(path.join(checkout, 'dist'), path.join(dir, 'dist'), { recursive: true });
  cpSync(path.join(checkout, 'bin'), path.join(dir, 'bin'), { recursive: true });
  symlinkSync(path.join(checkout, 'node_modules'), path.join(dir, 'node_modules'));
  symlinkSync(path.join(checkout, 'package.json'), path.join(dir, 'package.json'));
  for (const name of names) {
    const toggle = TOGGLES[name];
    if (!toggle) throw new Error(`unknown toggle ${name}; known: ${Object.keys(TOGGLES).join(', ')}`);
    for (const { file, find, replace } of toggle.patches) {
      const at = path.join(dir, 'dist', file);
      const text = readFileSync(at, 'utf8');
      const found = typeof find === 'string' ? text.includes(find) : find.test(text);
      if (!found) throw new Error(`toggle ${name}: ${String(find)} is not in dist/${file} of ${checkout} (a build it does not apply to)`);
      writeFileSync(at, typeof find === 'string' ? text.replaceAll(find, replace) : text.replace(new RegExp(find.source, 'g'), replace));
    }
  }
  return dir;
}
