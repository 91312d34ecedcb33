import { z } from 'zod';
import { defineMethod } from './method-descriptor.js';
import type { ChatPermissions } from './results.js';
import { cursor, id, limit, opt } from './schema-parts.js';
import type { Chat, StoredRecord, StreamState } from './types.js';

/**
 * Chats, the two-agent view: open, list, permissions, the paged transcript, and the follow and
 * watch subscriptions.
 * Part of the method table (methods.ts), in the API document's order.
 */
export const chatMethods = [
  defineMethod<{ chat: Chat; created: boolean }>()({
    name: 'chats.open',
    access: 'authenticated',
    params: z
      .strictObject({ peerAgentId: opt(id()), agentAId: opt(id()), agentBId: opt(id()) })
      .refine(
        (p) =>
          (p.peerAgentId !== undefined) !== (p.agentAId !== undefined && p.agentBId !== undefined) &&
          (p.agentAId === undefined) === (p.agentBId === undefined),
        'give peerAgentId (agent) or both agentAId and agentBId (admin)',
      ),
    summary: 'Create or find the chat of a pair (race-free).',
    result: '{chat, created}',
  }),
  defineMethod<{ chat: Chat; streams: [StreamState, StreamState] }>()({
    name: 'chats.get',
    access: 'authenticated',
    params: z.strictObject({ chatId: id() }),
    summary: 'A chat and its two stream states.',
    result: '{chat, streams}',
  }),
  defineMethod<{ chats: Chat[]; nextCursor: string | null }>()({
    name: 'chats.list',
    access: 'authenticated',
    params: z.strictObject({ cursor: opt(cursor()), limit: opt(limit(500)) }),
    summary: "The caller's chats (all for admin).",
    result: '{chats, nextCursor}',
  }),
  defineMethod<ChatPermissions>()({
    name: 'chats.permissions',
    access: 'authenticated',
    params: z.strictObject({ chatId: id() }),
    summary: 'Current permission and grant state of a chat.',
    result: '{chatId, policy, participants}',
  }),
  defineMethod<{ entries: StoredRecord[]; nextCursor: string | null; liveCursor: string }>()({
    name: 'chats.history',
    access: 'authenticated',
    params: z.strictObject({
      chatId: id(),
      cursor: opt(cursor()),
      limit: opt(limit(500)),
      direction: opt(z.enum(['backward', 'forward'])),
    }),
    summary: 'Snapshot-paged transcript of both directions.',
    result: '{entries, nextCursor, liveCursor}',
  }),
  defineMethod<{ subscriptionId: string; cursor: string }>()({
    name: 'chats.follow',
    access: 'authenticated',
    params: z.strictObject({ chatId: id(), cursor: opt(cursor()), from: opt(z.enum(['end', 'acknowledged', 'generation-start'])) }),
    summary:
      "Subscribe to chats.batch notifications from a compound cursor, the current ends, (agents) where their own last receipt left off, or (agents) the start of the peer stream's current generation.",
    result: '{subscriptionId, cursor}',
  }),
  defineMethod<{ subscriptionId: string }>()({
    name: 'chats.watch',
    access: 'agent',
    params: z.strictObject({}),
    summary: 'Subscribe to chats.opened notifications: every chat created later that includes the caller.',
    result: '{subscriptionId}',
  }),
  defineMethod<{ subscriptionId: string; ended: boolean }>()({
    name: 'chats.unfollow',
    access: 'authenticated',
    params: z.strictObject({ subscriptionId: z.string().min(1).max(128) }),
    summary: 'End a subscription of this connection.',
    result: '{subscriptionId, ended}',
  }),
] as const;
