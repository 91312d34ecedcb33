// yello as a dependency, the way a user gets it: `npm pack` of a fresh clone (the working tree's
// tracked and unignored files, no dist/: the prepack script must build it), then
// `npm install <tgz>` into a new project, offline from the npm cache. The installed package is
// imported from a strict TypeScript program and from plain JavaScript, and its `yello` binary runs
// against a real daemon. About 1–2 minutes on 2 cores, most of it the prepack build and the
// install (measured: pack ≈ 20 s CPU, install ≈ 6 s CPU).

import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEnv } from '../helpers/cli-runner.js';
import { DaemonProcess, makeTempDir, repoRoot } from '../helpers/daemon-process.js';
import { Teardown } from '../helpers/teardown.js';

const run = promisify(execFile);
const PACK_TIMEOUT_MS = 400_000;
const STEP_TIMEOUT_MS = 180_000;
const tsc = path.join(repoRoot, 'node_modules/typescript/bin/tsc');

interface PackResult {
  filename: string;
  files: { path: string }[];
}

const teardown = new Teardown();
let work = '';
let app = '';
let packed: PackResult;
let version = '';

/** Runs a command to completion; rejects with its output on a non-zero exit. */
async function sh(
  cmd: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv = cliEnv(),
): Promise<{ stdout: string; stderr: string }> {
  try {
    return await run(cmd, args, { cwd, env, timeout: STEP_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`, { cause: err });
  }
}

/** What a fresh clone holds: tracked files plus new unignored ones, copied without dist/ or node_modules. */
async function copyWorkingTree(to: string): Promise<void> {
  const { stdout } = await sh('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], repoRoot);
  for (const rel of stdout.split('\0').filter((p) => p !== '')) {
    const from = path.join(repoRoot, rel);
    const stat = await fs.lstat(from).catch(() => null);
    if (!stat?.isFile()) continue; // deleted in the working tree, or a symlink (node_modules)
    await fs.mkdir(path.dirname(path.join(to, rel)), { recursive: true });
    await fs.copyFile(from, path.join(to, rel));
  }
  // The build needs the dev dependencies (typescript, @types/node); a clone gets them from `npm ci`.
  await fs.symlink(path.join(repoRoot, 'node_modules'), path.join(to, 'node_modules'));
}

beforeAll(async () => {
  work = teardown.add(await makeTempDir('yl-pack-'), (d) => fs.rm(d, { recursive: true, force: true }));
  const clone = path.join(work, 'clone');
  const out = path.join(work, 'out');
  app = path.join(work, 'app');
  await fs.mkdir(out);
  await fs.mkdir(app);
  await copyWorkingTree(clone);
  await expect(fs.stat(path.join(clone, 'dist'))).rejects.toThrow();
  const { stdout } = await sh('npm', ['pack', '--json', '--pack-destination', out], clone);
  [packed] = JSON.parse(stdout) as [PackResult];
  version = (JSON.parse(await fs.readFile(path.join(clone, 'package.json'), 'utf8')) as { version: string }).version;
  await fs.writeFile(path.join(app, 'package.json'), JSON.stringify({ name: 'an-app', private: true, type: 'module' }));
  await sh(
    'npm',
    ['install', path.join(out, packed.filename), '@types/node@20', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'],
    app,
  );
}, PACK_TIMEOUT_MS);

afterAll(() => teardown.run());

describe('the npm package', () => {
  it('ships the built client, the binary, docs and license, and nothing of the working tree besides', () => {
    const files = packed.files.map((f) => f.path);
    for (const f of ['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md', 'bin/yello', 'docs/protocol.md']) expect(files).toContain(f);
    // dist/cli/yello.js: the bundled entry bin/yello runs (scripts/bundle-cli.mjs, part of the build).
    for (const f of ['dist/client/index.js', 'dist/client/index.d.ts', 'dist/cli/main.js', 'dist/cli/yello.js', 'dist/daemon/daemon.js'])
      expect(files).toContain(f);
    const stray = files.filter(
      (f) => /^(test|bench|\.ci|src|examples|scripts|systemd|node_modules)\//.test(f) || /cursor\.json$|\.map$|\.token$/.test(f),
    );
    // The one script shipped: postinstall patches the postgres.js driver (scripts/patch-postgres.mjs says why).
    expect(stray.filter((f) => f !== 'scripts/patch-postgres.mjs')).toEqual([]);
    expect(files).toContain('scripts/patch-postgres.mjs');
  });

  it(
    'a strict TypeScript program type-checks against the installed client, without zod, and a wrong call does not',
    async () => {
      await fs.writeFile(
        path.join(app, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            target: 'ES2022',
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            strict: true,
            noEmit: true,
            types: ['node'],
          },
          files: ['app.ts', 'wrong.ts'],
        }),
      );
      await fs.writeFile(
        path.join(app, 'app.ts'),
        [
          "import { YelloClient, type ParamsIn, type StreamState } from 'yello';",
          "const params: ParamsIn<'chats.open'> = { peerAgentId: 'agent_b' };",
          'export async function main(token: string): Promise<StreamState> {',
          '  const client = await YelloClient.connect({ token });',
          '  const { chat } = await client.rpc.chats.open(params);',
          '  const { streams } = await client.rpc.chats.get({ chatId: chat.id });',
          '  return streams[0];',
          '}',
          '',
        ].join('\n'),
      );
      // The same program with an unknown param: proof that the check above checks something.
      await fs.writeFile(
        path.join(app, 'wrong.ts'),
        "import { YelloClient } from 'yello';\nawait (await YelloClient.connect({ token: 't' })).rpc.chats.open({ peer: 1 });\n",
      );
      // One tsc run for both files (tsc is the slow part): it fails, and only on wrong.ts.
      const r = await run(process.execPath, [tsc, '-p', '.', '--listFiles'], {
        cwd: app,
        timeout: STEP_TIMEOUT_MS,
        maxBuffer: 16 * 1024 * 1024,
      }).then(
        (ok) => ({ ...ok, failed: false }),
        (err: unknown) => ({ ...(err as { stdout: string; stderr: string }), failed: true }),
      );
      const lines = r.stdout.split('\n').filter((l) => l.trim() !== '');
      const errors = lines.filter((l) => /error TS\d+/.test(l));
      expect(r.failed).toBe(true);
      expect(errors.length, r.stdout).toBeGreaterThan(0);
      expect(
        errors.filter((l) => !l.startsWith('wrong.ts(')),
        r.stdout,
      ).toEqual([]);
      expect(errors.join('\n')).toMatch(/'peer' does not exist/);
      expect(lines.some((f) => f.endsWith('/node_modules/yello/dist/client/index.d.ts'))).toBe(true);
      expect(lines.filter((f) => f.includes('/node_modules/zod/'))).toEqual([]);
    },
    STEP_TIMEOUT_MS,
  );

  it('plain JavaScript imports the client', { timeout: STEP_TIMEOUT_MS }, async () => {
    const { stdout } = await sh(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "const m = await import('yello'); console.log(typeof m.YelloClient, typeof m.Coordinator, typeof m.verifyRecord);",
      ],
      app,
    );
    expect(stdout.trim()).toBe('function function function');
  });

  it(
    'the installed yello binary prints its version, its status (the bundle) and runs the demo (the yargs program) against a daemon',
    async () => {
      const bin = path.join(app, 'node_modules/.bin/yello');
      expect((await sh(bin, ['--version'], app)).stdout.trim()).toBe(version);
      const daemon = teardown.add(await DaemonProcess.start(), (d) => d.cleanup());
      const env = cliEnv({ YELLO_SOCKET: daemon.socketPath, YELLO_DATA_DIR: daemon.dataDir, XDG_STATE_HOME: path.join(work, 'state') });
      expect(JSON.parse((await sh(bin, ['status', '--json'], app, env)).stdout)).toMatchObject({ version, storage: 'ok' });
      const demo = await new Promise<{ code: number | null; out: string }>((resolve) => {
        const child = spawn(bin, ['demo'], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        child.stdout.on('data', (c: Buffer) => (out += c.toString()));
        child.stderr.on('data', (c: Buffer) => (out += c.toString()));
        child.on('close', (code) => {
          resolve({ code, out });
        });
      });
      expect(demo.out).toMatch(/\b0 problems\b/);
      expect(demo.code).toBe(0);
    },
    STEP_TIMEOUT_MS,
  );
});
