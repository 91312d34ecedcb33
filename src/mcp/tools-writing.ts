import { makeStreamId } from '../shared/ids.js';
import type { AgentSessions } from './agent-sessions.js';
import { TEXT_MAX_BYTES } from './tool-schemas.js';
import { checkText, defined, peerOf, type ToolSpec } from './tool-kit.js';

/** The `acknowledge` tool. */
export function acknowledgeTool(agent: AgentSessions): ToolSpec<'acknowledge'> {
  return {
    title: 'Acknowledge',
    description:
      'Acknowledge the batch read_new or wait_for_message presented in a chat, or the one a channel event named (batchId: its batch_id), by appending a receipt to your stream: the other agent then knows you have processed everything up to its end. batchId defaults to the batch presented. Acknowledge only what you have processed.',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    async run(input) {
      const session = await agent.session(input.chatId);
      const { result, batch } = await session.acknowledge(input.batchId);
      const acknowledged = { streamId: batch.streamId, generation: batch.generation, nextPosition: batch.nextPosition };
      return {
        text: `Acknowledged ${peerOf(session.chat, session.agentId).username}'s records before position ${batch.nextPosition} (receipt at position ${result.firstPosition} of ${result.streamId}, operation ${result.operationId}).`,
        structured: { chatId: input.chatId, acknowledged, operationId: result.operationId, receiptPosition: result.firstPosition },
      };
    },
  };
}

/** The `send` tool. */
export function sendTool(agent: AgentSessions): ToolSpec<'send'> {
  return {
    title: 'Send a message',
    description: `Send a message to the other agent of a chat (text: not empty, at most ${TEXT_MAX_BYTES} bytes of UTF-8). With acknowledge: true the message and the receipt of the batch read_new or wait_for_message presented (or of a channel event's batch_id, passed as batchId) are appended atomically (both or neither); with nothing presented that is an error and nothing is sent. If the outcome is unknown (OUTCOME_UNKNOWN), do not send again: call operation_status.`,
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    async run(input) {
      checkText(input.text);
      const session = await agent.session(input.chatId);
      const { result, acknowledged } = await session.send(
        defined({ text: input.text, messageId: input.messageId, acknowledge: input.acknowledge, batchId: input.batchId }) as {
          text: string;
        },
      );
      const ack = acknowledged
        ? { streamId: acknowledged.streamId, generation: acknowledged.generation, nextPosition: acknowledged.nextPosition }
        : null;
      const redacted = result.redactions.map((r) => `${r.count} × ${r.kind}`).join(', ');
      const text =
        `Sent to ${peerOf(session.chat, session.agentId).username} at position ${result.firstPosition} of ${result.streamId} (operation ${result.operationId})` +
        (ack ? `, acknowledging their records before position ${ack.nextPosition} in the same append` : '') +
        (redacted ? `. Your PII policy redacted: ${redacted}` : '') +
        '.';
      return {
        text,
        structured: {
          chatId: input.chatId,
          streamId: result.streamId,
          generation: result.generation,
          operationId: result.operationId,
          position: result.firstPosition,
          nextPosition: result.nextPosition,
          redactions: result.redactions,
          acknowledged: ack,
        },
      };
    },
  };
}

/** The `operation_status` tool. */
export function operationStatusTool(agent: AgentSessions): ToolSpec<'operation_status'> {
  return {
    title: 'Operation status',
    description:
      'Settle a send or acknowledge whose outcome is unknown (after OUTCOME_UNKNOWN or PAUSED): asks the daemon whether it was stored and lets this chat write again. Nothing is resent. With operationId, reports any operation of your stream in the chat.',
    annotations: { readOnlyHint: true, openWorldHint: false },
    async run(input) {
      const session = agent.existing(input.chatId);
      let status;
      if (session) status = await session.operationStatus(input.operationId);
      else if (input.operationId) {
        const { agentId } = await agent.hello();
        const operation = await agent.link.call('operations.get', {
          streamId: makeStreamId(input.chatId, agentId),
          operationId: input.operationId,
        });
        status = {
          operation,
          committed: operation.state === 'committed' ? true : operation.state === 'unknown' ? false : null,
          resolved: false,
          kind: null,
          paused: false,
        };
      } else status = { operation: null, committed: null, resolved: false, kind: null, paused: false };
      const op = status.operation;
      const structured = {
        chatId: input.chatId,
        operationId: op?.operationId ?? null,
        state: op?.state ?? ('none' as const),
        committed: status.committed,
        generation: op?.generation ?? null,
        firstPosition: op?.firstPosition ?? null,
        nextPosition: op?.nextPosition ?? null,
        committedAt: op?.committedAt ?? null,
        resolved: status.resolved,
        kind: status.kind,
        paused: status.paused,
      };
      let text: string;
      if (!op) text = `No append in chat ${input.chatId} has an unknown outcome; nothing is paused.`;
      else if (op.state === 'committed')
        text = `Operation ${op.operationId} is stored at positions ${op.firstPosition}..${op.nextPosition} (generation ${op.generation}, ${op.committedAt}). Do not send it again.`;
      else if (op.state === 'pending') text = `Operation ${op.operationId} is admitted but not yet on disk; ask again in a moment.`;
      else
        text = status.resolved
          ? `Operation ${op.operationId} is not stored. Sending works again; send the message again if you still want it delivered.`
          : // An older operation may have been committed and then trimmed (docs/protocol.md §6.7).
            `Operation ${op.operationId} is not stored: never committed, or committed and since trimmed by retention.`;
      if (status.resolved) text += ' This chat is no longer paused.';
      else if (status.paused) text += ' This chat is still paused: call operation_status without operationId to settle it.';
      return { text, structured };
    },
  };
}
