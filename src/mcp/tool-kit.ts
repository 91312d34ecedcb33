import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import type { MessageBatch } from '../client/index.js';
import type { AgentSessions } from './agent-sessions.js';
import type { ChatSession } from './chat-session.js';
import type { McpLog } from './log.js';
import { batchLines } from '../client/peer-data.js';
import { presentRecord } from './present.js';
import { describeError, ToolFailure, type ToolErrorInfo } from './tool-errors.js';
import { TEXT_MAX_BYTES, textBytes, toolInputs, toolOutputs, type ToolInput, type ToolName, type ToolOutput } from './tool-schemas.js';
import { peerOf } from '../shared/chat-peers.js';

/** `read_new` without `waitMs` does not wait. */
export const READ_DEFAULTS = { waitMs: 0 } as const;

/** What a tool handler gets besides its input: the request's cancellation signal, `_meta` (a progressToken) and a way to notify. */
export type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** One tool: what the model is told, and how it runs. */
export interface ToolSpec<T extends ToolName> {
  title: string;
  description: string;
  annotations: ToolAnnotations;
  run(input: ToolInput<T>, extra: Extra): Promise<{ text: string; structured: ToolOutput<T> }>;
}

/** A failure that belongs to a chat the input did not name (a wait across chats found a break in one). */
export class InChat extends Error {
  constructor(
    readonly chatId: string,
    readonly error: unknown,
  ) {
    super(error instanceof Error ? error.message : String(error));
  }
}

/**
 * While a wait runs, `notifications/progress` for the request's progressToken (none without
 * one): every tenth of the wait, at least 1 s and at most 5 s apart, `progress` in ms waited of
 * `total`. A client that resets its request timeout on progress can so wait longer than it.
 */
export function progressWhileWaiting(extra: Extra, totalMs: number, message: string): () => void {
  const token = extra._meta?.progressToken;
  if (token === undefined || totalMs <= 0) return () => {};
  const started = Date.now();
  const every = Math.min(5000, Math.max(1000, Math.floor(totalMs / 10)));
  const timer = setInterval(() => {
    const progress = Math.min(Date.now() - started, totalMs);
    void extra
      .sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress, total: totalMs, message } })
      .catch(() => {});
  }, every);
  return () => {
    clearInterval(timer);
  };
}

/** Text a message may carry: not empty, not only whitespace, within the byte cap of docs/mcp.md "Limits". */
export function checkText(text: string): void {
  if (text.trim() === '')
    throw new ToolFailure(
      'INVALID_PARAMS',
      'text is empty or only whitespace; nothing was sent',
      'Write the message text and call send again.',
      { path: 'text', reason: 'EMPTY' },
    );
  const bytes = textBytes(text);
  if (bytes > TEXT_MAX_BYTES)
    throw new ToolFailure(
      'TEXT_TOO_LARGE',
      `text is ${bytes} bytes of UTF-8 (as JSON escapes it), over the limit of ${TEXT_MAX_BYTES} bytes per message; nothing was sent`,
      `Shorten it, or split it into several messages of at most ${TEXT_MAX_BYTES} bytes each (docs/mcp.md, "Limits").`,
      { path: 'text', bytes, limit: TEXT_MAX_BYTES },
    );
}

/** A tool error result: the agent reads `type: message` and what to do; `_meta` carries the same for programs. */
export function toolError(err: unknown, context: { chatId?: string; socketPath: string }): CallToolResult {
  return toolErrorResult(describeError(err, context));
}

function toolErrorResult(info: ToolErrorInfo): CallToolResult {
  return {
    isError: true,
    content: [{ type: 'text', text: `${info.type}: ${info.message}\nWhat to do: ${info.action}` }],
    _meta: { 'yello/error': info },
  };
}

export { peerOf };
export const agentRef = (a: { id: string; username: string; name: string }) => ({ agentId: a.id, username: a.username, name: a.name });
export const batchView = (b: MessageBatch) => ({
  batchId: b.batchId,
  streamId: b.streamId,
  generation: b.generation,
  fromPosition: b.fromPosition,
  nextPosition: b.nextPosition,
  records: b.records.map(presentRecord),
});
export const defined = <T extends Record<string, unknown>>(o: T) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

/** A presented batch as the model reads it: which chat, from whom, the records, and what to do. */
export function presentation(session: ChatSession, r: { batch: MessageBatch; repeated: boolean; more: boolean }): string {
  const peer = peerOf(session.chat, session.agentId).username;
  return [
    `Chat ${session.chatId}, from ${peer}, positions ${r.batch.fromPosition}..${r.batch.nextPosition} of ${r.batch.streamId}${r.repeated ? ' (shown before, not acknowledged yet)' : ''}:`,
    ...batchLines(r.batch, session.chat),
    `batchId: ${r.batch.batchId}`,
    `When you have processed it: reply with send {chatId: "${session.chatId}", text, acknowledge: true}, or acknowledge {chatId: "${session.chatId}"}.${r.more ? ' More messages follow after this batch.' : ''}`,
  ].join('\n');
}

/** Registers one tool on the server: runs it, and maps whatever it throws to a tool error result once, here. */
export type Register = <T extends ToolName>(name: T, spec: ToolSpec<T>) => void;

/** The {@link Register} of `server`: errors described for `agent`'s socket, failures logged to `log`. */
export function toolRegistrar(server: McpServer, agent: AgentSessions, log: McpLog): Register {
  return <T extends ToolName>(name: T, spec: ToolSpec<T>) => {
    server.registerTool(
      name,
      {
        title: spec.title,
        description: spec.description,
        inputSchema: toolInputs[name],
        outputSchema: toolOutputs[name],
        annotations: spec.annotations,
      },
      (async (input: ToolInput<T>, extra: Extra): Promise<CallToolResult> => {
        let chatId = (input as { chatId?: string }).chatId;
        try {
          const { text, structured } = await spec.run(input, extra);
          return { content: [{ type: 'text', text }], structuredContent: structured };
        } catch (caught) {
          let err = caught;
          if (err instanceof InChat) {
            chatId = err.chatId;
            err = err.error;
          }
          const info = describeError(err, { ...(chatId ? { chatId } : {}), socketPath: agent.link.socketPath });
          log.warn({ tool: name, chatId, type: info.type }, 'tool failed');
          return toolErrorResult(info);
        }
      }) as never,
    );
  };
}
