// Interventions: each POST names one admin method of docs/protocol.md §6 and is shown beside
// its CLI equivalent. Destructive ones need a typed confirmation.

import { YelloClientError, type YelloClient } from '../client/index.js';
import { ID_PATTERN } from '../shared/ids.js';
import { html, type Html } from './html.js';

/** What an action answers: shown on the result page. */
export interface ActionResult {
  ok: boolean;
  title: string;
  message: Html;
  /** Where "Back" leads, relative to the console's prefix. */
  back: string;
}

/** A refusal that names what to fix (a missing confirmation, a bad field). */
class Refused extends Error {}

function need(form: URLSearchParams, name: string): string {
  const v = form.get(name)?.trim();
  if (!v) throw new Refused(`the field "${name}" is missing`);
  return v;
}

async function agentId(c: YelloClient, nameOrId: string): Promise<{ id: string; username: string }> {
  const { agent } = await c.call('agents.get', nameOrId.startsWith('agt_') ? { agentId: nameOrId } : { username: nameOrId });
  return { id: agent.id, username: agent.username };
}

type Handler = (c: YelloClient, form: URLSearchParams) => Promise<Omit<ActionResult, 'ok' | 'back'>>;

const HANDLERS: Record<string, Handler> = {
  release: async (c, f) => {
    const streamId = need(f, 'streamId');
    await c.call('streams.release', { streamId });
    return { title: 'Claim released', message: html`No coordinator holds <code>${streamId}</code> now; its next writer claims it anew.` };
  },
  trim: async (c, f) => {
    const streamId = need(f, 'streamId');
    const beforePosition = need(f, 'beforePosition');
    if (!/^(0|[1-9][0-9]*)$/.test(beforePosition)) throw new Refused('the position must be a decimal number');
    const r = await c.call('streams.trim', { streamId, beforePosition, force: f.get('force') === 'true' });
    return { title: 'Stream trimmed', message: html`<code>${streamId}</code> now starts at position ${r.firstPosition}.` };
  },
  reset: async (c, f) => {
    const streamId = need(f, 'streamId');
    const reason = need(f, 'reason');
    if (f.get('confirm')?.trim() !== 'reset')
      throw new Refused('a reset seals the stream\'s generation for good: type "reset" in the confirmation field to do it');
    const s = await c.call('streams.reset', { streamId, reason });
    return {
      title: 'Stream reset',
      message: html`<code>${streamId}</code> is now at generation ${s.generation}; the old generation stays readable (export the chat). Its
        reader gets a continuity break and decides how to go on.`,
    };
  },
  'rotate-token': async (c, f) => {
    const id = need(f, 'agentId');
    const { token } = await c.call('agents.rotateToken', { agentId: id });
    return {
      title: 'Token rotated',
      message: html`The old token of <code>${id}</code> and every session opened with it stopped working. The new token is shown this once;
        put it where the agent reads it (a 0600 file): <code class="secret">${token}</code>`,
    };
  },
  disable: async (c, f) => {
    const a = await agentId(c, need(f, 'agentId'));
    if (f.get('confirm')?.trim() !== a.username)
      throw new Refused(`disabling cannot be undone: type the username "${a.username}" to confirm`);
    await c.call('agents.disable', { agentId: a.id });
    return { title: 'Agent disabled', message: html`${a.username}'s token and sessions stopped working; its chats stay readable.` };
  },
  'grant-add': async (c, f) => {
    const a = await agentId(c, need(f, 'agent'));
    const p = await agentId(c, need(f, 'peer'));
    if (f.get('op') === 'remove') {
      const r = await c.call('grants.remove', { agentId: a.id, peerAgentId: p.id });
      return { title: r.removed ? 'Grant removed' : 'No such grant', message: html`${a.username} → ${p.username}` };
    }
    await c.call('grants.add', { agentId: a.id, peerAgentId: p.id });
    return { title: 'Grant added', message: html`${a.username} may open a chat with, and send to, ${p.username}.` };
  },
};

/** Run action `name` with the posted form; daemon errors become a result that says what happened. */
export async function runAction(c: YelloClient, name: string, form: URLSearchParams): Promise<ActionResult | null> {
  const handler = HANDLERS[name];
  if (!handler) return null;
  const chatId = form.get('chatId');
  const back = chatId && ID_PATTERN.test(chatId) ? `chats/${chatId}` : './';
  try {
    return { ok: true, back, ...(await handler(c, form)) };
  } catch (err) {
    if (err instanceof Refused) return { ok: false, back, title: 'Not done', message: html`${err.message}.` };
    if (err instanceof YelloClientError)
      return { ok: false, back, title: 'Refused by the daemon', message: html`${err.type}: ${err.message}` };
    throw err;
  }
}
