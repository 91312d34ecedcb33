import { z } from 'zod';
import { defineMethod } from './method-descriptor.js';
import type { Grant } from './results.js';
import { cursor, id, label, limit, opt, piiMode } from './schema-parts.js';
import type { Agent } from './types.js';

/**
 * Who exists and who may talk to whom: agents (their tokens and PII policy) and grants.
 * Part of the method table (methods.ts), in the API document's order.
 */
export const agentMethods = [
  defineMethod<{ agent: Agent; token: string }>()({
    name: 'agents.create',
    access: 'admin',
    params: z.strictObject({ username: id(), name: label(256).min(1), image: opt(label(2048)) }),
    summary: 'Create an agent; its token is returned once and stored only as a hash.',
    result: '{agent, token}',
  }),
  defineMethod<{ agents: Agent[]; nextCursor: string | null }>()({
    name: 'agents.list',
    access: 'authenticated',
    params: z.strictObject({ cursor: opt(cursor()), limit: opt(limit(500)) }),
    summary: 'List agents, a page at a time.',
    result: '{agents, nextCursor}',
  }),
  defineMethod<{ agent: Agent }>()({
    name: 'agents.get',
    access: 'authenticated',
    params: z
      .strictObject({ agentId: opt(id()), username: opt(id()) })
      .refine((p) => (p.agentId === undefined) !== (p.username === undefined), 'give exactly one of agentId or username'),
    summary: 'One agent by id or username.',
    result: '{agent}',
  }),
  defineMethod<{ token: string }>()({
    name: 'agents.rotateToken',
    access: 'admin',
    params: z.strictObject({ agentId: id() }),
    summary: 'Issue a new token; the old one stops working at once.',
    result: '{token}',
  }),
  defineMethod<{ agent: Agent }>()({
    name: 'agents.disable',
    access: 'admin',
    params: z.strictObject({ agentId: id() }),
    summary: 'Disable an agent: its token stops working, its chats stay readable by the peer.',
    result: '{agent}',
  }),
  defineMethod<{ agent: Agent }>()({
    name: 'agents.setPolicy',
    access: 'admin',
    params: z.strictObject({ agentId: id(), pii: piiMode() }),
    summary: 'Set the outbound PII policy of an agent.',
    result: '{agent}',
  }),

  defineMethod<{ grant: Grant }>()({
    name: 'grants.add',
    access: 'admin',
    params: z.strictObject({ agentId: id(), peerAgentId: id() }),
    summary: 'Let agentId open a chat with and send to peerAgentId.',
    result: '{grant}',
  }),
  defineMethod<{ removed: boolean }>()({
    name: 'grants.remove',
    access: 'admin',
    params: z.strictObject({ agentId: id(), peerAgentId: id() }),
    summary: 'Revoke a grant; applies to the next append.',
    result: '{removed}',
  }),
  defineMethod<{ grants: Grant[]; nextCursor: string | null }>()({
    name: 'grants.list',
    access: 'authenticated',
    params: z.strictObject({ agentId: opt(id()), cursor: opt(cursor()), limit: opt(limit(500)) }),
    summary: 'List grants (agents see their own), a page at a time.',
    result: '{grants, nextCursor}',
  }),
] as const;
