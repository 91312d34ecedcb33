// errors.js, not the client's index: the hook path (yello hook) loads as little as it can.
import { ContinuityBreakError, WriterActiveError } from '../client/errors.js';
import { CliError, EXIT } from './output.js';

/**
 * A continuity break met while reading `chatId`, as a person reads it: what happened, that
 * nothing was skipped or acknowledged, and the way on step by step (exit 3, one line).
 */
export function breakError(err: ContinuityBreakError, chatId: string): CliError {
  const { streamId, expected, actual } = err.data;
  const stream = String(streamId);
  const what =
    err.reason === 'GENERATION_CHANGED'
      ? `the admin reset ${stream} (generation ${String(expected)} → ${String(actual)}) while it held messages you have not acknowledged`
      : err.reason === 'PREFIX_UNAVAILABLE'
        ? `records of ${stream} from position ${String(expected)} were trimmed before you acknowledged them (retained from ${String(actual)})`
        : `the stream ${stream} no longer exists`;
  const onward =
    err.reason === 'GENERATION_CHANGED'
      ? `continue in the new generation: \`yello chats read ${chatId} --from generation-start --ack\``
      : `mark what remains read: \`yello ack ${chatId}\``;
  return new CliError(
    `continuity break (${err.reason}) in chat ${chatId}: ${what}; nothing was shown or acknowledged. To recover: 1) see what you missed: \`yello chats history ${chatId} --all-generations\` (the whole conversation, sealed generations included; \`yello chats export ${chatId}\` for a verifiable copy); 2) ${onward}; 3) if that is not what you want, ask the admin (\`yello streams show ${stream}\`, \`yello streams reset\`/\`yello streams release\`)`,
    EXIT.continuity,
  );
}

/** WRITER_ACTIVE for a CLI command: who holds the stream, and the three ways out. */
export function writerActiveError(err: WriterActiveError, streamId: string): CliError {
  const holder =
    err.data.connected === false
      ? `a claim (epoch ${String(err.data.epoch)}) this command may not take over`
      : `another process connected right now (epoch ${String(err.data.epoch)}, most likely \`yello mcp\` or \`yello chats follow --ack\` for the same agent)`;
  return new CliError(
    `WRITER_ACTIVE: ${streamId} is held by ${holder}; nothing was sent. Stop that process (then this command takes over by itself), pass --replace to take over (it is fenced), or release it as the admin: \`yello streams release ${streamId}\``,
    EXIT.error,
  );
}
