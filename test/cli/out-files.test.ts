// `--out` files (docs/protocol.md §9, docs/security.md): `yello chats export --out` creates a
// new 0600 file with O_EXCL|O_NOFOLLOW, so a file someone else pre-created, or a planted
// symlink, is refused and never written into; `--force` replaces the path atomically with a new
// file (a symlink itself, never its target).

import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseJsonLines } from '../helpers/cli-runner.js';
import { ok } from '../helpers/wire-fixtures.js';
import { useCli } from '../helpers/use-daemon.js';

const { daemon, cli } = useCli();
let chatId: string;

beforeAll(async () => {
  const admin = await daemon().connectAs();
  const a = ok(await admin.call('agents.create', { username: 'outa', name: 'A' }));
  const b = ok(await admin.call('agents.create', { username: 'outb', name: 'B' }));
  chatId = ok(await admin.call('chats.open', { agentAId: a.agent.id, agentBId: b.agent.id })).chat.id;
});

const mode = (p: string) => fs.statSync(p).mode & 0o777;
const at = (name: string) => path.join(daemon().dir, name);

describe('chats export --out', () => {
  it('creates a new file with mode 0600 whatever the umask', async () => {
    const out = at('new.jsonl');
    const r = await cli().run(['chats', 'export', chatId, '--out', out], { env: {} });
    expect(r.code, r.stderr).toBe(0);
    expect(mode(out)).toBe(0o600);
    expect(parseJsonLines(fs.readFileSync(out, 'utf8')).length).toBeGreaterThan(0);
  });

  it('refuses a pre-existing file with a clear message and leaves it as it was', async () => {
    const out = at('existing.jsonl');
    fs.writeFileSync(out, 'someone else\n', { mode: 0o644 });
    const r = await cli().run(['chats', 'export', chatId, '--out', out]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--out .*existing\.jsonl already exists; .*--force/);
    expect(fs.readFileSync(out, 'utf8')).toBe('someone else\n');
    expect(mode(out)).toBe(0o644);
  });

  it('refuses a planted symlink and leaves its target untouched', async () => {
    const target = at('victim');
    fs.writeFileSync(target, 'precious\n', { mode: 0o600 });
    const link = at('link.jsonl');
    fs.symlinkSync(target, link);
    const r = await cli().run(['chats', 'export', chatId, '--out', link]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/already exists/);
    expect(fs.readFileSync(target, 'utf8')).toBe('precious\n');
    // A dangling symlink is refused too (O_EXCL never creates through a link).
    const dangling = at('dangling.jsonl');
    fs.symlinkSync(at('would-be-created'), dangling);
    expect((await cli().run(['chats', 'export', chatId, '--out', dangling])).code).toBe(2);
    expect(fs.existsSync(at('would-be-created'))).toBe(false);
  });

  it('--force replaces the path by a new 0600 file, atomically: a symlink is replaced, not followed', async () => {
    const target = at('victim2');
    fs.writeFileSync(target, 'precious\n', { mode: 0o644 });
    const link = at('link2.jsonl');
    fs.symlinkSync(target, link);
    const r = await cli().run(['chats', 'export', chatId, '--out', link, '--force']);
    expect(r.code, r.stderr).toBe(0);
    expect(fs.lstatSync(link).isSymbolicLink()).toBe(false);
    expect(mode(link)).toBe(0o600);
    expect(fs.readFileSync(target, 'utf8')).toBe('precious\n');
    const existing = at('existing2.jsonl');
    // Text no export holds: a short word like "old" can turn up inside a random id or signature.
    fs.writeFileSync(existing, 'old contents of the file\n', { mode: 0o644 });
    const ino = fs.statSync(existing).ino;
    expect((await cli().run(['chats', 'export', chatId, '--out', existing, '--force'])).code).toBe(0);
    expect(fs.statSync(existing).ino).not.toBe(ino);
    expect(mode(existing)).toBe(0o600);
    expect(fs.readFileSync(existing, 'utf8')).not.toContain('old contents');
    // No temp file is left beside it.
    expect(fs.readdirSync(daemon().dir).filter((n) => n.includes('.tmp-'))).toEqual([]);
  });

  it('a failed export leaves no file behind', async () => {
    const out = at('failed.jsonl');
    const r = await cli().run(['chats', 'export', 'chat_doesnotexist', '--out', out]);
    expect(r.code).not.toBe(0);
    expect(fs.existsSync(out)).toBe(false);
  });
});
