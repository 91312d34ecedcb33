// How the CLI words a failed connection (src/cli/output.ts reportError): permission denied on
// the socket is a group-membership problem, not a stopped daemon. Root cannot be refused a
// socket, so the errno is given here rather than provoked.

import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ConnectionLostError } from '../../src/client/index.js';
import { reportError } from '../../src/cli/output.js';

function stderrOf(err: unknown): string {
  let text = '';
  const stderr = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  expect(reportError({ stderr }, err)).toBe(1);
  return text;
}

const lost = (code: string) =>
  new ConnectionLostError(`cannot connect to yellod at /run/yello/yello.sock: ${code}: …`, false, Object.assign(new Error(code), { code }));

describe('reportError for a connection that failed', () => {
  it('EACCES: says to add the user to the socket group, not "is the daemon running?"', () => {
    const text = stderrOf(lost('EACCES'));
    expect(text).toMatch(/add your user to the socket's group/);
    expect(text).not.toMatch(/is the daemon running/);
    expect(text.trim().split('\n')).toHaveLength(1);
  });

  it('ENOENT / ECONNREFUSED: asks whether the daemon is running', () => {
    for (const code of ['ENOENT', 'ECONNREFUSED']) expect(stderrOf(lost(code))).toMatch(/is the daemon running\? see --socket/);
  });
});
