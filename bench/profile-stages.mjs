// The stages of an append, for bench/profile.mjs: every sample of a CPU profile of the daemon's
// event loop is charged to one stage, by the innermost frame of its stack that a rule below
// names (so JSON.stringify called by the reply is the reply's, and a native signing call is
// the signer's). Frames of Node's core and V8 builtins are skipped while looking: they belong
// to whoever called them. A stack with no named frame at all is charged by its leaf (socket
// reads, timers, promise jobs: Node's own work between requests).

/** [stage, test(url, functionName)] in order: the first rule a frame matches names its stage. */
const RULES = [
  ['sign (ES256)', (u) => /\/daemon\/crypto\/(signer|sign-batcher|sign-pool|sign-worker)\.js$/.test(u)],
  ['hash (SHA-256: content, ids)', (u) => u.endsWith('/daemon/crypto/hashing.js')],
  ['request digest', (u, f) => u.endsWith('/daemon/streams/append-checks.js') && f === 'requestDigest'],
  ['PII policy', (u) => u.includes('/daemon/pii/')],
  ['validation (zod)', (u) => u.includes('node_modules/zod/') || /\/shared\/(schema-parts|schemas|methods)\.js$/.test(u)],
  ['quotas', (u) => u.endsWith('/daemon/streams/quotas.js')],
  ['metrics', (u) => u.endsWith('/daemon/runtime/metrics.js') || u.includes('node_modules/prom-client/')],
  ['logging (pino)', (u) => u.includes('node_modules/pino') || u.includes('node_modules/thread-stream')],
  [
    'dispatch (json-rpc-2.0, session gate, handler)',
    (u) => /\/daemon\/rpc\/(rpc-server|rpc-methods)\.js$/.test(u) || u.includes('node_modules/json-rpc-2.0/'),
  ],
  [
    'reply (serialize, socket write)',
    (u, f) => (u.endsWith('/daemon/rpc/connection.js') && /^#?(sendRaw|write)$/.test(f)) || u.endsWith('/daemon/rpc/line-bytes.js'),
  ],
  ['connection (framing, parse, limits, output pool)', (u) => u.includes('/daemon/rpc/')],
  ['push to followers', (u) => /\/daemon\/streams\/(subscriptions|follow-start|chat-follow)\.js$/.test(u)],
  ['heads (commit, listeners)', (u) => u.endsWith('/daemon/streams/heads.js')],
  ['admission (checks, fencing, records)', (u) => u.includes('/daemon/streams/') || u.includes('/daemon/directory/')],
  ['store: PostgreSQL (statements, driver, notices)', (u) => u.includes('/daemon/store/postgres/') || u.includes('node_modules/postgres/')],
  [
    'store: checksums of values (CRC-32)',
    (u) => u.endsWith('/daemon/store/value-codec.js') || u.endsWith('/daemon/store/leveldb/value-codec.js'),
  ],
  [
    'store: LevelDB (keys, encode, overlay, group commit)',
    (u) => u.includes('/daemon/store/leveldb/') || /node_modules\/(classic-level|abstract-level|level-|maybe-combine|module-error)/.test(u),
  ],
  ['store: port and shared (heads layout, records layout)', (u) => u.includes('/daemon/store/')],
  ['daemon (other)', (u) => u.includes('/dist/')],
];

/** The stage of a leaf-only stack (no rule matched on the way up), by the leaf itself. */
function leafStage(cf) {
  if (cf.functionName === '(garbage collector)') return 'GC (main thread)';
  if (cf.functionName === '(program)') return 'V8 / native outside JS';
  if (cf.url.startsWith('node:')) return 'Node core (socket reads, timers, promises)';
  return 'native, unattributed';
}

/** The stages in the order of an append's way through the daemon (for printing). */
export const STAGE_ORDER = [
  'Node core (socket reads, timers, promises)',
  'connection (framing, parse, limits, output pool)',
  'dispatch (json-rpc-2.0, session gate, handler)',
  'validation (zod)',
  'quotas',
  'admission (checks, fencing, records)',
  'request digest',
  'hash (SHA-256: content, ids)',
  'PII policy',
  'sign (ES256)',
  'heads (commit, listeners)',
  'store: port and shared (heads layout, records layout)',
  'store: checksums of values (CRC-32)',
  'store: LevelDB (keys, encode, overlay, group commit)',
  'store: PostgreSQL (statements, driver, notices)',
  'push to followers',
  'metrics',
  'logging (pino)',
  'reply (serialize, socket write)',
  'daemon (other)',
  'GC (main thread)',
  'V8 / native outside JS',
  'native, unattributed',
];

/**
 * Samples per stage of a `.cpuprofile` (Chrome format): { stages: Map(stage → samples), idle,
 * total, usPerSample }. `root` is the checkout's file:// prefix, stripped from urls.
 */
export function stagesOf(prof) {
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stageOfNode = new Map();
  const stageOf = (id) => {
    const known = stageOfNode.get(id);
    if (known !== undefined) return known;
    let stage = null;
    for (let at = id; at !== undefined && stage === null; at = parent.get(at)) {
      const cf = byId.get(at).callFrame;
      const url = cf.url;
      if (url === '' || url.startsWith('node:')) continue;
      const rule = RULES.find(([, test]) => test(url, cf.functionName));
      if (rule) stage = rule[0];
    }
    stage ??= leafStage(byId.get(id).callFrame);
    stageOfNode.set(id, stage);
    return stage;
  };
  const stages = new Map();
  let idle = 0;
  for (const id of prof.samples) {
    if (byId.get(id).callFrame.functionName === '(idle)') {
      idle++;
      continue;
    }
    const s = stageOf(id);
    stages.set(s, (stages.get(s) ?? 0) + 1);
  }
  const total = prof.samples.length;
  return { stages, idle, total, usPerSample: (prof.endTime - prof.startTime) / total };
}
