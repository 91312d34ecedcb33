import type { Readable } from 'node:stream';
import type { HookEvent } from './hook-args.js';

/**
 * What `yello hook` uses of the JSON an agent writes on a command hook's stdin. Claude Code
 * (hooks reference; 2.1.328's input schema) and Codex (codex-rs/hooks/src/schema.rs, 0.169.0)
 * send the same names: `session_id`, `transcript_path`, `cwd`, `hook_event_name`, and on Stop
 * `stop_hook_active` (true when this stop follows a continuation a Stop hook asked for). Every
 * other field (`prompt`, `source`, `model`, `turn_id`, `last_assistant_message`, …) is left alone.
 */
export interface HookInput {
  sessionId: string;
  event: HookEvent;
  stopHookActive: boolean;
}

/** More than any hook input an agent sends (Claude Code's Stop input carries the last answer). */
export const MAX_HOOK_INPUT_BYTES = 16 * 1024 * 1024;

/** The hook input, or why it is not one (a line for stderr). */
export function parseHookInput(text: string, event: HookEvent): HookInput | { error: string } {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { error: `stdin is not the hook's JSON (${text.trim() === '' ? 'empty' : 'not JSON'}); nothing done` };
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return { error: "stdin is not the hook's JSON object; nothing done" };
  const o = v as Record<string, unknown>;
  const sessionId = o.session_id;
  if (typeof sessionId !== 'string' || sessionId === '') return { error: 'the hook input has no session_id; nothing done' };
  if (o.hook_event_name !== undefined && o.hook_event_name !== event)
    return {
      error: `the hook input is for ${JSON.stringify(o.hook_event_name)}, but this command was set up for ${event}; nothing done (check the hook configuration)`,
    };
  const active = o.stop_hook_active;
  if (active !== undefined && typeof active !== 'boolean') return { error: 'stop_hook_active is not a boolean; nothing done' };
  return { sessionId, event, stopHookActive: active === true };
}

/** All of stdin, up to the cap (a longer input is reported, not read on). */
export async function readHookStdin(stdin: Readable): Promise<string | { error: string }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stdin) {
    const b = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
    size += b.length;
    if (size > MAX_HOOK_INPUT_BYTES) return { error: `stdin is larger than ${MAX_HOOK_INPUT_BYTES} bytes; nothing done` };
    chunks.push(b);
  }
  return Buffer.concat(chunks).toString('utf8');
}
