// Stryker's buildCommand (stryker.config.mjs): compiles the instrumented sources of the sandbox
// to dist/, which the integration tests' daemon children run. Instrumented files carry
// `// @ts-nocheck`, but tsc may still report errors caused by the instrumentation; it emits
// anyway (noEmitOnError is off), so the exit code is ignored and the build is checked by what it
// wrote instead: the daemon entry exists and carries Stryker's mutant switch.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

// Stryker runs this before it links node_modules into the sandbox; Node's lookup through the
// parent directories finds the project's own typescript.
const tscBin = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const tsc = spawnSync(process.execPath, [tscBin, '-p', 'tsconfig.json'], {
  stdio: ['ignore', 'pipe', 'pipe'],
  encoding: 'utf8',
});
const errors = (tsc.stdout.match(/error TS\d+/g) ?? []).length;
if (errors > 0) console.log(`mutation build: tsc reported ${errors} error(s) in instrumented code (emitted anyway)`);

const entry = 'dist/daemon/daemon.js';
if (!existsSync(entry)) {
  console.error(`mutation build: ${entry} missing\n${tsc.stdout}\n${tsc.stderr}`);
  process.exit(1);
}
let instrumented = 0;
const walk = (dir) => {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p);
    else if (p.endsWith('.js') && readFileSync(p, 'utf8').includes('stryMutAct_9fa48')) instrumented++;
  }
};
walk('dist');
if (instrumented === 0) {
  console.error('mutation build: no instrumented file in dist/ (is the buildCommand running in the sandbox?)');
  process.exit(1);
}
console.log(`mutation build: dist/ holds ${instrumented} instrumented module(s)`);

// bin/yello runs the bundle of the CLI's entry (npm run build's second step): bundle the
// instrumented modules too, so that a spawned `yello` runs the mutants as the in-process CLI does.
const bundle = spawnSync(process.execPath, [path.join('scripts', 'bundle-cli.mjs')], {
  stdio: ['ignore', 'pipe', 'pipe'],
  encoding: 'utf8',
});
if (bundle.status !== 0) {
  console.error(`mutation build: scripts/bundle-cli.mjs failed\n${bundle.stdout}\n${bundle.stderr}`);
  process.exit(1);
}
