import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Argv } from 'yargs';
import { connectAgent, sessionAgentId, socketPath, withClient, type GlobalArgs } from './context.js';
import { CliError, EXIT, displayText, printJson } from './output.js';
import type { PlannedFile } from './setup-files.js';
import { cliStateDir } from './writer-state.js';

type SetupArgs = GlobalArgs & {
  target: 'claude-code' | 'codex' | 'gemini';
  agent: string;
  scope: 'project' | 'user';
  'project-dir'?: string;
  channel: boolean;
  hooks: boolean;
  'dry-run': boolean;
  remove: boolean;
  check: boolean;
};

const USERNAME = /^[A-Za-z0-9_-]{1,128}$/;

/**
 * The token file to name in the configuration: absolute, a regular file, not readable by
 * group or others, not empty. The token itself never goes into a configuration file.
 */
function tokenFileOf(args: SetupArgs): string {
  const given = args['token-file'] || args.io.env.YELLO_TOKEN_FILE;
  if (!given)
    throw new CliError(
      'yello setup names a token file and never the token: pass --token-file FILE (yello agents add NAME --token-out FILE makes one), or set $YELLO_TOKEN_FILE',
      EXIT.usage,
    );
  const file = resolve(given);
  let st;
  try {
    st = statSync(file);
  } catch (err) {
    throw new CliError(`cannot use the token file ${file}: ${(err as Error).message}`, EXIT.usage);
  }
  if (!st.isFile()) throw new CliError(`the token file ${file} is not a regular file`, EXIT.usage);
  if ((st.mode & 0o077) !== 0)
    throw new CliError(
      `the token file ${file} is readable or writable by others (mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}); make it private first: chmod 600 ${file}`,
      EXIT.usage,
    );
  if (st.size === 0) throw new CliError(`the token file ${file} is empty`, EXIT.usage);
  return file;
}

/** The username the daemon says the token is for; it must be `--agent`. */
async function checkToken(args: SetupArgs, tokenFile: string): Promise<void> {
  const connecting = connectAgent({ ...args, 'token-file': tokenFile }).catch((err: unknown) => {
    if (err instanceof CliError) throw err;
    throw new CliError(
      `cannot check the token with the daemon at ${socketPath(args)}: ${(err as Error).message}; start the daemon (yello status says whether it runs), or pass --no-check to write the entry unchecked`,
      EXIT.error,
    );
  });
  const username = await withClient(connecting, async (c) => {
    if (c.session.role !== 'agent')
      throw new CliError(`${tokenFile} holds the admin token; an agent's configuration takes that agent's token file`, EXIT.usage);
    return (await c.call('agents.get', { agentId: sessionAgentId(c) })).agent.username;
  });
  if (username !== args.agent)
    throw new CliError(
      `${tokenFile} is the token of ${username}, not of ${args.agent}: pass that agent's token file, or --agent ${username}`,
      EXIT.usage,
    );
}

function validate(args: SetupArgs): void {
  if (!USERNAME.test(args.agent))
    throw new CliError('--agent takes a yello username ([A-Za-z0-9_-], as yello agents list shows it)', EXIT.usage);
  if (args.channel && args.target !== 'claude-code')
    throw new CliError(
      '--channel is for Claude Code only (a channel is how Claude Code lets an MCP server push into a session)',
      EXIT.usage,
    );
  if (args.hooks && args.target === 'gemini')
    throw new CliError(
      'yello has no hooks for Gemini CLI: it gets the MCP server (tools read_new, wait_for_message, send, …); leave out --hooks',
      EXIT.usage,
    );
}

/** What the user is told after the files: how to load it, and what each agent asks of them. */
function notes(args: SetupArgs, serverName: string): string[] {
  const out: string[] = [];
  if (args.target === 'claude-code') {
    if (args.scope === 'project')
      out.push(
        `Claude Code asks you to approve the project's .mcp.json server "${serverName}" the first time you run claude here (claude mcp list shows it as pending until then).`,
      );
    out.push(
      args.channel
        ? `Start Claude Code with the channel loaded: claude --dangerously-load-development-channels server:${serverName}`
        : 'Restart Claude Code (or run /mcp) to load it; claude mcp list shows it.',
    );
  } else if (args.target === 'codex') {
    out.push('Start a new Codex session to load it; codex mcp list shows it.');
    if (args.hooks)
      out.push(
        'Codex runs a new or changed hook only after you trust it: open /hooks in Codex and trust the three yello hooks (SessionStart, UserPromptSubmit, Stop). Hooks are on by default since Codex 0.124 ([features] hooks = false turns them off).',
      );
    if (args.scope === 'project') out.push("Codex reads a project's .codex/ only when you trust the project.");
  } else {
    out.push('Restart Gemini CLI to load it; gemini mcp list shows it. Gemini CLI connects MCP servers only in folders you trust.');
  }
  return out;
}

async function run(args: SetupArgs): Promise<void> {
  validate(args);
  const [
    { fileTargets, hookCommands },
    { readText, writePlan, removeEmptyDirs, SetupManifest, sha256 },
    { mcpClientConfig, mcpServerName },
  ] = await Promise.all([import('./setup-targets.js'), import('./setup-files.js'), import('../mcp/config.js')]);
  const serverName = mcpServerName(args.agent);
  const projectDir = resolve(args['project-dir'] ?? process.cwd());
  const socket = resolve(socketPath(args));
  const tokenFile = args.remove ? '' : tokenFileOf(args);
  if (!args.remove && args.check) await checkToken(args, tokenFile);
  const nodePath = process.execPath;
  const binPath = fileURLToPath(new URL('../../bin/yello', import.meta.url));
  const entry = mcpClientConfig({ serverName, nodePath, binPath, socketPath: socket, tokenFile }).mcpServers[serverName];
  if (!entry) throw new Error('mcpClientConfig lost the entry');
  if (args.channel) entry.args.push('--channel');
  const hooks =
    args.hooks && args.target !== 'gemini'
      ? hookCommands({ nodePath, binPath, agent: args.target, socketPath: socket, tokenFile, serverName })
      : null;
  const targets = fileTargets({ agent: args.target, scope: args.scope, projectDir, serverName, server: entry, hooks, env: args.io.env });
  const manifest = new SetupManifest(
    cliStateDir(args['state-dir'], args.io.env),
    [args.target, args.scope, args.scope === 'project' ? projectDir : '', serverName].join('\n'),
  );
  const record = manifest.load();

  const plan = targets.flatMap((t): PlannedFile[] => {
    const before = readText(t.path);
    if (!args.remove) {
      const { text, changes } = t.add(before ?? '');
      return changes.length === 0 ? [] : [{ path: t.path, before, after: text, changes, privateFile: t.privateFile }];
    }
    if (before === null) return [];
    const kept = record?.files[t.path];
    const { text, changes } = t.remove(before);
    if (kept && kept.afterSha256 === sha256(before))
      // Nothing else touched the file since setup wrote it: every byte goes back (or the file goes).
      return [
        {
          path: t.path,
          before,
          after: kept.before,
          changes: kept.before === null ? [...changes, 'removed the file setup created'] : changes,
          privateFile: t.privateFile,
        },
      ];
    return changes.length === 0 ? [] : [{ path: t.path, before, after: text, changes, privateFile: t.privateFile }];
  });

  let removedDirs: string[] = [];
  if (!args['dry-run']) {
    const createdDirs = writePlan(plan);
    if (args.remove) {
      removedDirs = removeEmptyDirs(record?.createdDirs ?? []);
      manifest.delete();
    } else if (plan.length > 0) manifest.record(plan, createdDirs);
  }
  const action = (f: { before: string | null; after: string | null }) =>
    f.after === null ? 'removed' : f.before === null ? 'created' : 'edited';
  const advice = args.remove ? [] : notes(args, serverName);
  if (args.json) {
    printJson(args.io, {
      serverName,
      dryRun: args['dry-run'],
      files: plan.map((f) => ({ path: f.path, action: action(f), changes: f.changes })),
      removedDirectories: removedDirs,
      notes: advice,
    });
    return;
  }
  const would = args['dry-run'] ? 'would be ' : '';
  if (plan.length === 0)
    args.io.stdout.write(args.remove ? `nothing of ${serverName} to remove\n` : `${serverName} is set up already: nothing to change\n`);
  for (const f of plan) {
    args.io.stdout.write(`${displayText(f.path)}: ${would}${action(f)}\n`);
    for (const c of f.changes) args.io.stdout.write(`  ${c}\n`);
  }
  for (const d of removedDirs) args.io.stdout.write(`${displayText(d)}: removed the empty directory setup created\n`);
  if (args['dry-run']) args.io.stdout.write('(dry run: nothing was written)\n');
  for (const n of advice) args.io.stdout.write(`${n}\n`);
}

/** `yello setup claude-code|codex|gemini --agent <username>`: wire an agent's own configuration files. */
export function setupCommand(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command(
    'setup <target>',
    "Wire an agent: the yello MCP server (and the hooks, for Claude Code and Codex) in that agent's own configuration files; --remove takes it out",
    (z: Argv<GlobalArgs>) =>
      z
        .positional('target', {
          choices: ['claude-code', 'codex', 'gemini'] as const,
          demandOption: true,
          describe: 'the agent program to wire',
        })
        .option('agent', { type: 'string', demandOption: true, describe: 'the yello username it acts as (its token file: --token-file)' })
        .option('scope', {
          choices: ['user', 'project'] as const,
          default: 'user' as const,
          describe: "user: your own configuration (every project); project: this project's files (--project-dir)",
        })
        .option('project-dir', { type: 'string', describe: 'with --scope project: the project (default: the current directory)' })
        .option('channel', {
          type: 'boolean',
          default: false,
          describe: 'Claude Code: run yello mcp --channel, which pushes messages into the session; prints the claude launch line',
        })
        .option('hooks', {
          type: 'boolean',
          default: false,
          describe: 'Claude Code, Codex: also add the SessionStart, UserPromptSubmit and Stop hooks (yello hook)',
        })
        .option('dry-run', { type: 'boolean', default: false, describe: 'print what would change, write nothing' })
        .option('remove', { type: 'boolean', default: false, describe: 'take out what setup added (a file it created goes again)' })
        .option('check', {
          type: 'boolean',
          default: true,
          describe: 'ask the daemon whose token the file holds (--no-check: trust --agent)',
        })
        .example('$0 --token-file ~/.config/yello/alice.token setup claude-code --agent alice --hooks', '')
        .example('$0 --token-file bob.token setup codex --agent bob --hooks --scope project', '')
        .example('$0 setup gemini --agent carol --remove', '')
        .epilogue(
          'Every other entry of those files is kept, and running it again changes nothing. The configuration names the token file, never the token. ' +
            '--remove puts a file back byte for byte when nothing else changed it since (a record in --state-dir), and otherwise takes out exactly the entries setup adds. ' +
            'See docs/agents.md.',
        ),
    (args: SetupArgs) => run(args),
  );
}
