// Request ids come back exactly as sent (docs/protocol.md §3.3). A numeric id must be a safe
// integer: a 20-digit one would not survive JSON.parse (it would be echoed rounded, matching no
// request of the client), so it is refused with -32600 and id null; a string id of any digits
// is echoed as it is.

import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { useDaemon } from '../helpers/use-daemon.js';

const { daemon } = useDaemon();

/** Send one raw line on a fresh connection and return the first answer line as text. */
function exchange(line: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(daemon().socketPath);
    let buf = '';
    s.setEncoding('utf8');
    s.on('data', (chunk: string) => {
      buf += chunk;
      const nl = buf.indexOf('\n');
      if (nl >= 0) {
        s.destroy();
        resolve(buf.slice(0, nl));
      }
    });
    s.on('error', reject);
    s.write(line + '\n');
  });
}

describe('request ids', () => {
  it('a 20-digit numeric id is refused with -32600 and id null, never echoed rounded', async () => {
    const text = await exchange('{"jsonrpc":"2.0","id":12345678901234567890,"method":"rpc.discover"}');
    expect(text).not.toContain('12345678901234567');
    const answer = JSON.parse(text) as { id: unknown; error?: { code: number } };
    expect(answer.id).toBeNull();
    expect(answer.error?.code).toBe(-32600);
  });

  it('fractional and out-of-range numeric ids are refused the same way', async () => {
    for (const id of ['1.5', '9007199254740992', '-9007199254740992', '1e21']) {
      const answer = JSON.parse(await exchange(`{"jsonrpc":"2.0","id":${id},"method":"rpc.discover"}`)) as {
        id: unknown;
        error?: { code: number };
      };
      expect(answer, id).toMatchObject({ id: null, error: { code: -32600 } });
    }
  });

  it('the largest safe integer and a 20-digit string id come back exactly', async () => {
    expect(await exchange('{"jsonrpc":"2.0","id":9007199254740991,"method":"session.hello","params":{"token":"x"}}')).toContain(
      '"id":9007199254740991',
    );
    expect(await exchange('{"jsonrpc":"2.0","id":"12345678901234567890","method":"session.hello","params":{"token":"x"}}')).toContain(
      '"id":"12345678901234567890"',
    );
  });
});
