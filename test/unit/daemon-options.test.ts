// The fast start path of `yello daemon` parses its options without yargs; it must agree with
// the yargs command on what it accepts, and hand everything unusual back to yargs (null).
import { describe, expect, it } from 'vitest';
import { DAEMON_OPTIONS, parseDaemonArgsFast } from '../../src/cli/daemon-options.js';

describe('parseDaemonArgsFast', () => {
  it('applies the table defaults when no option is given', () => {
    expect(parseDaemonArgsFast([])).toEqual({
      socket: undefined,
      'data-dir': undefined,
      'log-level': 'info',
      'socket-mode': '0660',
      'max-line-bytes': DAEMON_OPTIONS['max-line-bytes'].default,
      'max-connections': 2048,
      'max-unsent-bytes': 16_777_216,
      'max-output-bytes': 33_554_432,
      'hello-timeout-ms': 5_000,
      'max-pending-hellos': 64,
      'max-sessions-per-agent': 64,
      'sign-workers': undefined,
      'quota-append-records': 1_000,
      'quota-append-bytes': 16_777_216,
      'quota-stored-bytes': 4_294_967_296,
      'quota-claims-per-minute': 60,
      'retention-max-records': 0,
      'retention-max-age-seconds': 0,
      'retention-unacknowledged': 'keep',
      'retention-interval-seconds': 600,
      policy: 'grants',
      'fault-fail-sync-file': undefined,
      'pg-answer-deadline-ms': undefined,
      'metrics-idle-ms': undefined,
    });
  });

  it('takes "--name value" and "--name=value", converting numbers', () => {
    const a = parseDaemonArgsFast([
      '--socket',
      '/tmp/s.sock',
      '--data-dir=/tmp/d',
      '--policy',
      'open',
      '--log-level=warn',
      '--max-connections',
      '20',
      '--max-line-bytes=4096',
      '--sign-workers',
      '2',
    ]);
    expect(a).toMatchObject({
      socket: '/tmp/s.sock',
      'data-dir': '/tmp/d',
      policy: 'open',
      'log-level': 'warn',
      'max-connections': 20,
      'max-line-bytes': 4096,
      'sign-workers': 2,
    });
  });

  it('returns null (the yargs path) for help, version, unknown flags, positionals, repeats as booleans, bad choices and bad numbers', () => {
    for (const args of [
      ['--help'],
      ['-h'],
      ['--version'],
      ['--no-such-flag'],
      ['extra'],
      ['--socket'],
      ['--policy', 'nope'],
      ['--log-level', 'loud'],
      ['--max-connections', 'many'],
      ['--max-line-bytes', ''],
      ['--dataDir', '/tmp/d'],
    ]) {
      expect(parseDaemonArgsFast(args), args.join(' ')).toBeNull();
    }
  });
});
