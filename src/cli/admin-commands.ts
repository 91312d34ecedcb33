import type { Argv } from 'yargs';
import { existsSync } from 'node:fs';
import { ConnectionLostError, TimeoutError, type Agent, type MethodResults, type StreamState, type YelloClient } from '../client/index.js';
import { CliWriter, settleKept } from './cli-writer.js';
import {
  adminTokenPath,
  agentToken,
  connectAdmin,
  connectAgent,
  connectAny,
  resolveAgentId,
  socketPath,
  withClient,
  type GlobalArgs,
} from './context.js';
import { CliError, errorMessage, EXIT, printJson, printObject, printTable } from './output.js';
import { allPages, LIST_PAGE } from '../client/list-pages.js';
import { readSecretFile, SecretFileSink } from './secret-files.js';
import { cliStateDir, WriterStore } from './writer-state.js';

type A<T = object> = GlobalArgs & T;
type Result<M extends keyof MethodResults> = MethodResults[M];
const out = (args: GlobalArgs, value: unknown, human: () => void) => {
  if (args.json) printJson(value);
  else human();
};
const agentRow = (a: Agent) => ({ id: a.id, username: a.username, name: a.name, pii: a.pii, disabled: a.disabled, created: a.createdAt });
const streamRow = (s: StreamState) => ({
  stream: s.streamId,
  generation: s.generation,
  first: s.firstPosition,
  next: s.nextPosition,
  acknowledged: s.acknowledged ? `${s.acknowledged.generation}/${s.acknowledged.nextPosition}` : '-',
  writer: s.writer.active ? `epoch ${s.writer.epoch}` : `free (epoch ${s.writer.epoch})`,
});

/**
 * Run `create` (which makes a secret shown once) with `--token-out` reserved beforehand, so a
 * refused file costs nothing and a made secret always has a place to go.
 */
async function withTokenOut<T extends { token: string }>(file: string | undefined, force: boolean, create: () => Promise<T>): Promise<T> {
  const sink = file ? SecretFileSink.open(file, force) : null;
  let r: T;
  try {
    r = await create();
  } catch (err) {
    sink?.abort();
    throw err;
  }
  sink?.commit(r.token + '\n');
  return r;
}

/** Options that would put a coordinator token on the command line (visible in `ps`): refused. */
export function coordinatorTokenOptions<T>(z: Argv<T>): Argv<T> {
  return z
    .option('coordinator-token-file', {
      type: 'string',
      describe: 'file holding a coordinator token (from `streams claim`), or - for stdin',
    })
    .option('coordinator-token', { type: 'string', hidden: true });
}

/** The coordinator token of `--coordinator-token-file`, if given; `--coordinator-token T` is a usage error. */
export function coordinatorTokenArg(args: { 'coordinator-token'?: string; 'coordinator-token-file'?: string }): string | null {
  if (args['coordinator-token'] !== undefined) {
    throw new CliError(
      '--coordinator-token puts a secret on the command line, where `ps` shows it; use --coordinator-token-file FILE (or - to read it from stdin)',
      EXIT.usage,
    );
  }
  const file = args['coordinator-token-file'];
  if (file === undefined) return null;
  // yargs turns a lone "-" option value into ''.
  return readSecretFile(file === '' ? '-' : file, '--coordinator-token-file');
}

/**
 * The username of each of `ids` (an id that no longer resolves stays an id): one `agents.get`
 * per agent for a few, every page of `agents.list` when there are more agents than a page.
 */
async function usernames(c: YelloClient, ids: string[]): Promise<(id: string) => string> {
  const unique = [...new Set(ids)];
  const known = new Map<string, string>();
  if (unique.length > LIST_PAGE) {
    const agents = await allPages(
      (cursor) => c.call('agents.list', { limit: LIST_PAGE, ...cursor }),
      (p) => p.agents,
    );
    for (const a of agents) known.set(a.id, a.username);
  } else {
    const found = await Promise.all(unique.map((agentId) => c.call('agents.get', { agentId }).catch(() => null)));
    for (const r of found) if (r) known.set(r.agent.id, r.agent.username);
  }
  return (id) => known.get(id) ?? id;
}

const DEFAULT_WAIT_S = 30;
const WAIT_POLL_MS = 100;

function daemonStatus(args: GlobalArgs): Promise<Result<'daemon.status'>> {
  return withClient(connectAny(args), (c) => c.call('daemon.status', {}));
}

/** `--wait` alone (yargs gives '') means the default; else a positive number of seconds. */
function waitSeconds(value: string): number {
  if (value === '') return DEFAULT_WAIT_S;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new CliError(`--wait takes a number of seconds, not ${JSON.stringify(value)}`, EXIT.usage);
  return n;
}

/**
 * `status --wait`: poll until the daemon answers. Not answering yet means nothing listens on
 * the socket, or (a first start) the daemon has not written its admin.token; anything else
 * (a refused token, an untrusted socket) is an answer or a mistake, and is reported at once.
 */
async function waitForStatus(args: GlobalArgs, seconds: number): Promise<Result<'daemon.status'>> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    try {
      return await daemonStatus(args);
    } catch (err) {
      const notYet =
        err instanceof ConnectionLostError ||
        err instanceof TimeoutError ||
        (err instanceof CliError && agentToken(args) === null && !existsSync(adminTokenPath(args)));
      if (!notYet) throw err;
      if (Date.now() + WAIT_POLL_MS > deadline) {
        throw new CliError(`the daemon at ${socketPath(args)} did not answer within ${seconds} s (last: ${errorMessage(err)})`, EXIT.error);
      }
      await new Promise((r) => setTimeout(r, WAIT_POLL_MS));
    }
  }
}

/** status, agents, grants, keys, streams, ops. */
export function adminCommands(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y
    .command(
      'status',
      'Daemon version, uptime, counts, storage state and active key',
      (z: Argv<GlobalArgs>) =>
        z
          .option('wait', {
            type: 'string',
            describe: `wait up to SECONDS (default ${DEFAULT_WAIT_S}) until the daemon answers; exit 1 with one line if it does not`,
          })
          .example('$0 daemon & $0 status --wait 10 >/dev/null', 'start a daemon and block until it is ready'),
      async (args: A<{ wait?: string }>) => {
        const s = args.wait === undefined ? await daemonStatus(args) : await waitForStatus(args, waitSeconds(args.wait));
        out(args, s, () => {
          printObject({
            version: s.version,
            uptime: `${Math.round(s.uptimeMs / 1000)} s`,
            storage: s.storage,
            ...(s.store ? { store: s.store.backend === 'postgresql' ? `postgresql ${s.store.url}` : s.store.backend } : {}),
            policy: s.policy,
            kid: s.kid,
            ...s.counts,
          });
          for (const i of s.integrity.walIncidents)
            process.stdout.write(
              `log loss ${i.detectedAt}: LevelDB dropped ${i.bytes} bytes of its write-ahead log; ${i.streams} stream generations marked corrupt\n`,
            );
          if (s.integrity.corruptStreams.length > 0) {
            process.stdout.write(`corrupt streams (${s.integrity.corruptStreams.length}; see yello doctor and docs/reliability.md):\n`);
            printTable(
              s.integrity.corruptStreams.map((m) => ({
                stream: m.streamId,
                generation: m.generation ?? 'all',
                from: m.fromPosition,
                detail: m.detail,
              })),
            );
          }
        });
      },
    )
    .command('agents', 'Manage agents (admin)', (yy: Argv<GlobalArgs>) =>
      yy
        .command(
          'add <username>',
          'Create an agent; prints its token once',
          (z: Argv<GlobalArgs>) =>
            z
              .positional('username', { type: 'string', demandOption: true })
              .option('name', { type: 'string', describe: 'display name (default: the username)' })
              .option('image', { type: 'string', describe: 'image URL' })
              .option('token-out', {
                type: 'string',
                describe: 'write the token to this new file (mode 0600) instead of printing it; an existing file is refused',
              })
              .option('force', {
                type: 'boolean',
                default: false,
                describe: 'with --token-out: replace an existing file (by a new one, atomically)',
              })
              .example('$0 agents add alice --name Alice --token-out alice.token', ''),
          async (args: A<{ username: string; name?: string; image?: string; 'token-out'?: string; force: boolean }>) => {
            await withClient(connectAdmin(args), async (c) => {
              const r = await withTokenOut(args['token-out'], args.force, () =>
                c.call('agents.create', {
                  username: args.username,
                  name: args.name ?? args.username,
                  ...(args.image ? { image: args.image } : {}),
                }),
              );
              const shown = args['token-out'] ? { agent: r.agent, tokenFile: args['token-out'] } : r;
              out(args, shown, () => {
                printObject(agentRow(r.agent));
                if (args['token-out']) process.stdout.write(`token written to ${args['token-out']} (0600)\n`);
                else process.stdout.write(`token     ${r.token}\n(shown once: store it now)\n`);
              });
            });
          },
        )
        .command('list', 'List agents', {}, async (args: A) => {
          await withClient(connectAny(args), async (c) => {
            const r = {
              agents: await allPages(
                (cursor) => c.call('agents.list', { limit: LIST_PAGE, ...cursor }),
                (p) => p.agents,
              ),
            };
            out(args, r, () => {
              printTable(r.agents.map(agentRow));
            });
          });
        })
        .command(
          'show <agent>',
          'Show one agent (id or username)',
          (z: Argv<GlobalArgs>) => z.positional('agent', { type: 'string', demandOption: true }),
          async (args: A<{ agent: string }>) => {
            await withClient(connectAny(args), async (c) => {
              const r = await c.call('agents.get', { agentId: await resolveAgentId(c, args.agent) });
              out(args, r, () => {
                printObject(agentRow(r.agent));
              });
            });
          },
        )
        .command(
          'rotate-token <agent>',
          'Issue a new token; the old one stops working at once',
          (z: Argv<GlobalArgs>) =>
            z
              .positional('agent', { type: 'string', demandOption: true })
              .option('token-out', { type: 'string', describe: 'write the token to this new file (0600); an existing file is refused' })
              .option('force', {
                type: 'boolean',
                default: false,
                describe: 'with --token-out: replace an existing file (by a new one, atomically)',
              }),
          async (args: A<{ agent: string; 'token-out'?: string; force: boolean }>) => {
            await withClient(connectAdmin(args), async (c) => {
              const agentId = await resolveAgentId(c, args.agent);
              const r = await withTokenOut(args['token-out'], args.force, () => c.call('agents.rotateToken', { agentId }));
              out(args, args['token-out'] ? { tokenFile: args['token-out'] } : r, () =>
                process.stdout.write(
                  args['token-out'] ? `token written to ${args['token-out']} (0600)\n` : `token  ${r.token}\n(shown once)\n`,
                ),
              );
            });
          },
        )
        .command(
          'disable <agent>',
          'Disable an agent (its token stops working)',
          (z: Argv<GlobalArgs>) => z.positional('agent', { type: 'string', demandOption: true }),
          async (args: A<{ agent: string }>) => {
            await withClient(connectAdmin(args), async (c) => {
              const r = await c.call('agents.disable', { agentId: await resolveAgentId(c, args.agent) });
              out(args, r, () => {
                printObject(agentRow(r.agent));
              });
            });
          },
        )
        .command(
          'policy <agent> <pii>',
          'Set the outbound PII policy: off, redact or reject',
          (z: Argv<GlobalArgs>) =>
            z
              .positional('agent', { type: 'string', demandOption: true })
              .positional('pii', { type: 'string', choices: ['off', 'redact', 'reject'] as const, demandOption: true }),
          async (args: A<{ agent: string; pii: 'off' | 'redact' | 'reject' }>) => {
            await withClient(connectAdmin(args), async (c) => {
              const r = await c.call('agents.setPolicy', { agentId: await resolveAgentId(c, args.agent), pii: args.pii });
              out(args, r, () => {
                printObject(agentRow(r.agent));
              });
            });
          },
        )
        .demandCommand(1, 'name an agents subcommand'),
    )
    .command('grants', 'Manage grants (who may chat with whom)', (yy: Argv<GlobalArgs>) =>
      yy
        .command(
          'add <agent> <peer>',
          'Let <agent> open a chat with and send to <peer>',
          (z: Argv<GlobalArgs>) =>
            z.positional('agent', { type: 'string', demandOption: true }).positional('peer', { type: 'string', demandOption: true }),
          async (args: A<{ agent: string; peer: string }>) => {
            await withClient(connectAdmin(args), async (c) => {
              const r = await c.call('grants.add', {
                agentId: await resolveAgentId(c, args.agent),
                peerAgentId: await resolveAgentId(c, args.peer),
              });
              out(args, r, () => {
                printObject(r.grant as unknown as Record<string, unknown>);
              });
            });
          },
        )
        .command(
          ['rm <agent> <peer>', 'remove'],
          'Revoke a grant (applies to the next append)',
          (z: Argv<GlobalArgs>) =>
            z.positional('agent', { type: 'string', demandOption: true }).positional('peer', { type: 'string', demandOption: true }),
          async (args: A<{ agent: string; peer: string }>) => {
            await withClient(connectAdmin(args), async (c) => {
              const r = await c.call('grants.remove', {
                agentId: await resolveAgentId(c, args.agent),
                peerAgentId: await resolveAgentId(c, args.peer),
              });
              out(args, r, () => process.stdout.write(r.removed ? 'removed\n' : 'no such grant\n'));
            });
          },
        )
        .command(
          'list [agent]',
          'List grants (an agent sees its own)',
          (z: Argv<GlobalArgs>) => z.positional('agent', { type: 'string' }),
          async (args: A<{ agent?: string }>) => {
            await withClient(connectAny(args), async (c) => {
              const filter = args.agent ? { agentId: await resolveAgentId(c, args.agent) } : {};
              const r = {
                grants: await allPages(
                  (cursor) => c.call('grants.list', { ...filter, limit: LIST_PAGE, ...cursor }),
                  (p) => p.grants,
                ),
              };
              if (args.json) {
                printJson(r);
                return;
              }
              // People read names; the ids stay in --json.
              const name = await usernames(
                c,
                r.grants.flatMap((g) => [g.agentId, g.peerAgentId]),
              );
              printTable(r.grants.map((g) => ({ agent: name(g.agentId), peer: name(g.peerAgentId), granted: g.grantedAt })));
            });
          },
        )
        .demandCommand(1, 'name a grants subcommand'),
    )
    .command('keys', 'Signing keys', (yy: Argv<GlobalArgs>) =>
      yy
        .command('list', 'The JWKS (use --json for a file `verify` can read)', {}, async (args: A) => {
          await withClient(connectAny(args), async (c) => {
            const r = await c.call('keys.list', {});
            out(args, r, () => {
              printTable(r.keys.map((k) => ({ kid: k.kid, status: k.status, created: k.createdAt })));
            });
          });
        })
        .command('rotate', 'Generate a new signing key (admin)', {}, async (args: A) => {
          await withClient(connectAdmin(args), async (c) => {
            const r = await c.call('keys.rotate', {});
            out(args, r, () => process.stdout.write(`active kid ${r.kid}\n`));
          });
        })
        .demandCommand(1, 'name a keys subcommand'),
    )
    .command('streams', 'Inspect and administer streams', (yy: Argv<GlobalArgs>) =>
      yy
        .command(
          'show <streamId>',
          'Stream state',
          (z: Argv<GlobalArgs>) => z.positional('streamId', { type: 'string', demandOption: true }),
          async (args: A<{ streamId: string }>) => {
            await withClient(connectAny(args), async (c) => {
              const r = await c.call('streams.get', { streamId: args.streamId });
              out(args, r, () => {
                printObject(streamRow(r));
              });
            });
          },
        )
        .command(
          'claim <streamId>',
          'Claim your outbound stream; prints the coordinator token',
          (z: Argv<GlobalArgs>) =>
            z
              .positional('streamId', { type: 'string', demandOption: true })
              .option('replace', { type: 'boolean', default: false, describe: 'take over from a live coordinator' })
              .option('reason', { type: 'string' }),
          async (args: A<{ streamId: string; replace: boolean; reason?: string }>) => {
            await withClient(connectAgent(args), async (c) => {
              const r = await c.call('streams.claim', {
                streamId: args.streamId,
                replace: args.replace,
                ...(args.reason ? { reason: args.reason } : {}),
              });
              out(args, r, () => {
                printObject(r);
              });
            });
          },
        )
        .command(
          'release <streamId>',
          "Release the writer claim: an agent releases the claim `send`/`ack` keep (or --coordinator-token-file's); admin releases any",
          (z: Argv<GlobalArgs>) => coordinatorTokenOptions(z.positional('streamId', { type: 'string', demandOption: true })),
          async (args: A<{ streamId: string; 'coordinator-token'?: string; 'coordinator-token-file'?: string }>) => {
            const token = coordinatorTokenArg(args);
            await withClient(connectAny(args), async (c) => {
              let r;
              if (c.session.role === 'admin')
                r = await c.call('streams.release', { streamId: args.streamId, ...(token ? { coordinatorToken: token } : {}) });
              else
                r = await new CliWriter(c, new WriterStore(cliStateDir(args['state-dir'])), socketPath(args), args.streamId).release(
                  token ?? undefined,
                );
              out(args, r, () => {
                printObject(streamRow(r));
              });
            });
          },
        )
        .command(
          'trim <streamId> <beforePosition>',
          'Drop records below a position (admin)',
          (z: Argv<GlobalArgs>) =>
            z
              .positional('streamId', { type: 'string', demandOption: true })
              .positional('beforePosition', { type: 'string', demandOption: true })
              .option('force', { type: 'boolean', default: false, describe: 'trim past what the peer acknowledged' }),
          async (args: A<{ streamId: string; beforePosition: string; force: boolean }>) => {
            await withClient(connectAdmin(args), async (c) => {
              const r = await c.call('streams.trim', { streamId: args.streamId, beforePosition: args.beforePosition, force: args.force });
              out(args, r, () => process.stdout.write(`firstPosition ${r.firstPosition}\n`));
            });
          },
        )
        .command(
          'reset <streamId>',
          'Start a new generation at position 0 (admin); readers must intervene',
          (z: Argv<GlobalArgs>) =>
            z.positional('streamId', { type: 'string', demandOption: true }).option('reason', { type: 'string', demandOption: true }),
          async (args: A<{ streamId: string; reason: string }>) => {
            await withClient(connectAdmin(args), async (c) => {
              const r = await c.call('streams.reset', { streamId: args.streamId, reason: args.reason });
              out(args, r, () => {
                printObject(streamRow(r));
              });
            });
          },
        )
        .demandCommand(1, 'name a streams subcommand'),
    )
    .command('ops', 'Operations (append outcomes)', (yy: Argv<GlobalArgs>) =>
      yy
        .command(
          'show <streamId> <operationId>',
          'Whether an operation committed, and where',
          (z: Argv<GlobalArgs>) =>
            z
              .positional('streamId', { type: 'string', demandOption: true })
              .positional('operationId', { type: 'string', demandOption: true }),
          async (args: A<{ streamId: string; operationId: string }>) => {
            await withClient(connectAny(args), async (c) => {
              const r = await c.call('operations.get', { streamId: args.streamId, operationId: args.operationId });
              settleKept(args, c, args.streamId, args.operationId, r.state);
              out(args, r, () => {
                printObject(r as unknown as Record<string, unknown>);
              });
            });
          },
        )
        .command(
          'list <streamId>',
          'Committed operations of a stream',
          (z: Argv<GlobalArgs>) =>
            z
              .positional('streamId', { type: 'string', demandOption: true })
              .option('limit', {
                type: 'number',
                describe: 'one page of at most this many (1-500); without --limit or --cursor every page is printed',
              })
              .option('cursor', { type: 'string', describe: 'continue from the nextCursor a previous page printed' }),
          async (args: A<{ streamId: string; limit?: number; cursor?: string }>) => {
            await withClient(connectAny(args), async (c) => {
              const onePage = args.limit !== undefined || args.cursor !== undefined;
              const r = onePage
                ? await c.call('operations.list', {
                    streamId: args.streamId,
                    limit: args.limit ?? 100,
                    ...(args.cursor ? { cursor: args.cursor } : {}),
                  })
                : {
                    operations: await allPages(
                      (cur) => c.call('operations.list', { streamId: args.streamId, limit: LIST_PAGE, ...cur }),
                      (p) => p.operations,
                    ),
                    nextCursor: null,
                  };
              out(args, r, () => {
                printTable(
                  r.operations.map((o) => ({
                    operation: o.operationId,
                    state: o.state,
                    generation: o.generation,
                    first: o.firstPosition,
                    next: o.nextPosition,
                    committed: o.committedAt,
                  })),
                );
                if (r.nextCursor) process.stdout.write(`more: --cursor ${r.nextCursor}\n`);
              });
            });
          },
        )
        .demandCommand(1, 'name an ops subcommand'),
    );
}

export { CliError, EXIT };
