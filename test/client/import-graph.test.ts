// The client entry must not load zod: only the daemon validates params, and zod was most of
// the client's import time. A child node process resolves every import through a hook that
// refuses zod, so any path to it (a value import of the method table, say) fails the import
// and names the module that asked for it.

import { execFile } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/daemon-process.js';

const run = promisify(execFile);

const REFUSE_ZOD = `
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  if (/\\/node_modules\\/zod\\//.test(resolved.url)) throw new Error('zod was loaded, by ' + context.parentURL);
  return resolved;
}`;

/** Import `file` (relative to the repo) in a fresh node with zod refused; the child's outcome. */
async function importWithoutZod(file: string): Promise<{ ok: boolean; stderr: string }> {
  const entry = pathToFileURL(path.join(repoRoot, file)).href;
  const script = [
    "import { register } from 'node:module';",
    `register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(REFUSE_ZOD)}));`,
    `await import(${JSON.stringify(entry)});`,
  ].join('\n');
  try {
    await run(process.execPath, ['--input-type=module', '-e', script], { cwd: repoRoot });
    return { ok: true, stderr: '' };
  } catch (err) {
    return { ok: false, stderr: String((err as { stderr?: string }).stderr) };
  }
}

describe('client module graph', () => {
  it('importing the built client entry (dist/client/index.js) does not load zod', async () => {
    const r = await importWithoutZod('dist/client/index.js');
    expect(r.stderr).toBe('');
    expect(r.ok).toBe(true);
  });

  it('the check sees zod when it is loaded (the method table imports it)', async () => {
    const r = await importWithoutZod('dist/shared/methods.js');
    expect(r.ok).toBe(false);
    expect(r.stderr).toContain('zod was loaded, by');
    expect(r.stderr).toContain('dist/shared/methods.js');
  });
});
