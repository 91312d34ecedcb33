// The yargs program renders help text only when asked for it. yargs 18 rendered a command's
// whole help as soon as its handler had started (`cacheHelpMessage`), 60–80 ms of cliui and
// string-width in every command it ran: `yello mcp`, `chats follow`, `chats history` (issue 54).
// The binary runs here with string-width made to throw: help text cannot be rendered unseen.

import { pathToFileURL } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { cliEnv, yelloBin } from '../helpers/cli-runner.js';
import { spawnAsync } from '../helpers/spawn-async.js';
import { useCli } from '../helpers/use-daemon.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const { cli, pair } = useCli();

const noWidths = `export async function load(url, context, next) {
  if (url.includes('/node_modules/string-width/'))
    return { format: 'module', shortCircuit: true, source: "export default function stringWidth() { throw new Error('help text rendered'); }" };
  return next(url, context);
}`;

/** The binary with `args`, string-width throwing when called. */
function withoutWidths(args: string[]) {
  const script = [
    "import { register } from 'node:module';",
    `register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(noWidths)}));`,
    `process.argv = [process.execPath, ${JSON.stringify(yelloBin)}, ...${JSON.stringify(args)}];`,
    `await import(${JSON.stringify(pathToFileURL(yelloBin).href)});`,
  ].join('\n');
  // Not spawnSync: the daemon runs in this worker and must answer meanwhile.
  return spawnAsync(process.execPath, ['--input-type=module', '-e', script], { env: cliEnv(cli().env()), timeout: 30_000 });
}

describe('the yargs program and help text', () => {
  it('a command it runs renders no help text; --help does', async () => {
    const p = await pair();
    await p.alice.ok(['send', p.chatId, 'hello']);
    const list = await withoutWidths(['--token-file', p.bob.tokenFile, '--json', 'chats', 'list']);
    expect(list.stderr).toBe('');
    expect(list.status).toBe(0);
    const history = await withoutWidths(['--token-file', p.bob.tokenFile, 'chats', 'history', p.chatId]);
    expect(history.stderr).toBe('');
    expect(history.status).toBe(0);
    expect(history.stdout).toContain('hello');
    // The stand-in is in place: help, asked for, is rendered (and throws here).
    const help = await withoutWidths(['chats', 'read', '--help']);
    expect(help.status).not.toBe(0);
    expect(help.stderr).toContain('help text rendered');
  });
});
