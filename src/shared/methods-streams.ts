import { z } from 'zod';
import { defineMethod } from './method-descriptor.js';
import type { OperationInfo } from './results.js';
import { appendMessageSchema, appendReceiptSchema, cursor, decimal, id, label, limit, opt, streamIdSchema } from './schema-parts.js';
import type { AppendResult, Checkpoint, ReadBatch, StreamState } from './types.js';

/**
 * One directional stream: the writer claim, appends, reads with exact continuity, checkpoints,
 * trim and reset (the admin's), and what became of an operation id.
 * Part of the method table (methods.ts), in the API document's order.
 */
export const streamMethods = [
  defineMethod<StreamState>()({
    name: 'streams.get',
    access: 'authenticated',
    params: z.strictObject({ streamId: streamIdSchema() }),
    summary: 'State of one directional stream.',
    result: 'StreamState',
  }),
  defineMethod<{ streamId: string; generation: string; epoch: string; coordinatorToken: string; nextPosition: string }>()({
    name: 'streams.claim',
    access: 'agent',
    params: z.strictObject({
      streamId: streamIdSchema(),
      replace: opt(z.union([z.boolean(), z.literal('if-abandoned')])),
      reason: opt(label(512)),
    }),
    summary:
      'Become the coordinator of your outbound stream (appends a writer fence); replace: true displaces any holder, "if-abandoned" only one without an open connection.',
    result: '{streamId, generation, epoch, coordinatorToken, nextPosition}',
  }),
  defineMethod<StreamState>()({
    name: 'streams.release',
    access: 'authenticated',
    params: z.strictObject({ streamId: streamIdSchema(), coordinatorToken: opt(z.string().min(1).max(256)) }),
    summary: 'Release the writer claim.',
    result: 'StreamState',
  }),
  defineMethod<AppendResult>()({
    name: 'streams.append',
    access: 'agent',
    params: z.strictObject({
      streamId: streamIdSchema(),
      coordinatorToken: z.string().min(1).max(256),
      generation: decimal(),
      expectedPosition: decimal(),
      operationId: id(),
      records: z
        .array(z.discriminatedUnion('type', [appendMessageSchema, appendReceiptSchema]))
        .min(1)
        .max(64),
    }),
    summary: 'Append 1–64 records atomically at expectedPosition, fenced by the coordinator token.',
    result: 'AppendResult',
  }),
  defineMethod<ReadBatch>()({
    name: 'streams.read',
    access: 'authenticated',
    params: z.strictObject({
      streamId: streamIdSchema(),
      generation: decimal(),
      fromPosition: decimal(),
      limit: opt(limit(1000)),
      maxBytes: opt(z.number().int().min(1).max(1_048_576)),
      waitMs: opt(z.number().int().min(0).max(30_000)),
    }),
    summary: 'Read records from a position with exact continuity.',
    result: 'ReadBatch',
  }),
  defineMethod<Checkpoint>()({
    name: 'streams.checkpoint',
    access: 'authenticated',
    params: z.strictObject({
      streamId: streamIdSchema(),
      generation: decimal(),
      fromPosition: opt(decimal()),
      nextPosition: opt(decimal()),
    }),
    summary: 'A daemon-signed checkpoint (record count and chain digest) of a range of one stream generation, for exports.',
    result: 'Checkpoint',
  }),
  defineMethod<{ firstPosition: string }>()({
    name: 'streams.trim',
    access: 'admin',
    params: z.strictObject({ streamId: streamIdSchema(), beforePosition: decimal(), force: opt(z.boolean()) }),
    summary: 'Drop records below beforePosition.',
    result: '{firstPosition}',
  }),
  defineMethod<StreamState>()({
    name: 'streams.reset',
    access: 'admin',
    params: z.strictObject({ streamId: streamIdSchema(), reason: label(512).min(1) }),
    summary: 'Start generation n+1 at position 0; seals the old one.',
    result: 'StreamState',
  }),

  defineMethod<OperationInfo>()({
    name: 'operations.get',
    access: 'authenticated',
    params: z.strictObject({ streamId: streamIdSchema(), operationId: id() }),
    summary: 'Whether an operation committed, and where.',
    result: '{state, generation?, firstPosition?, nextPosition?, committedAt?, requestDigest?}',
  }),
  defineMethod<{ operations: OperationInfo[]; nextCursor: string | null }>()({
    name: 'operations.list',
    access: 'authenticated',
    params: z.strictObject({ streamId: streamIdSchema(), cursor: opt(cursor()), limit: opt(limit(500)) }),
    summary: 'Committed operations of a stream, oldest first.',
    result: '{operations, nextCursor}',
  }),
] as const;
