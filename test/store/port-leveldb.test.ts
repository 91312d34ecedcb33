// The storage port's conformance suite (port-conformance.ts) on LevelDB: a fresh store in a temp
// dir per test, opened the way the daemon opens it (store-open.ts, stored counts).

import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { Counters } from '../../src/daemon/store/leveldb/counters.js';
import { LevelStore } from '../../src/daemon/store/leveldb/level-store.js';
import { openStore } from '../../src/daemon/store/leveldb/store-open.js';
import { makeTempDir } from '../helpers/daemon-process.js';
import { silentLog } from '../helpers/in-process-store.js';
import { portConformance } from './port-conformance.js';

portConformance('LevelDB', async () => {
  const root = await makeTempDir('yl-port-');
  mkdirSync(path.join(root, 'db'), { recursive: true });
  let failNext = false;
  const opened = await openStore(root, silentLog, {
    injectFailure: () => {
      const fail = failNext;
      failNext = false;
      return fail;
    },
  });
  const store = new LevelStore(opened.storage, await Counters.load(opened.storage, silentLog));
  return {
    store,
    failNextCommit: () => {
      failNext = true;
    },
    close: async () => {
      await store.close().catch(() => {});
      rmSync(root, { recursive: true, force: true });
    },
  };
});
