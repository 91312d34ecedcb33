// Type-level tests of the daemon's handler table (src/daemon/rpc/rpc-server.ts `Handler<M>`):
// a handler must return its method's result type, the type the client's calls resolve to, so
// an answer that drifts from the client's types fails `npm run typecheck` (tsc -p test).

import { expectTypeOf } from 'vitest';
import type { YelloClient } from '../../src/client/index.js';
import type { ChatReader } from '../../src/daemon/streams/chat-reader.js';
import type { streamCheckpoint } from '../../src/daemon/streams/checkpoints.js';
import type { Handler } from '../../src/daemon/rpc/rpc-server.js';
import type { StreamStore } from '../../src/daemon/streams/stream-store.js';
import type { Result } from '../../src/shared/methods.js';
import type { StreamState } from '../../src/shared/types.js';

// @ts-expect-error the kid is a string
export const wrongField: Handler<'keys.rotate'> = () => ({ kid: 1 });
// @ts-expect-error an async handler is checked too: positions are decimal strings
export const wrongAsync: Handler<'streams.trim'> = () => Promise.resolve({ firstPosition: 0 });
// @ts-expect-error nextCursor is required (null when there is no next page)
export const missingField: Handler<'chats.list'> = () => ({ chats: [] });
// @ts-expect-error a handler cannot answer something else entirely
export const wrongShape: Handler<'streams.get'> = () => 'ok';

export const right: Handler<'keys.rotate'> = () => ({ kid: 'k' });
export const rightAsync: Handler<'streams.trim'> = () => Promise.resolve({ firstPosition: '0' });

// Handlers see params after validation: optional params are undefined, never null.
export const params: Handler<'streams.read'> = (p) => {
  expectTypeOf(p.generation).toEqualTypeOf<string>();
  expectTypeOf(p.limit).toEqualTypeOf<number | undefined>();
  return undefined as unknown as Result<'streams.read'>;
};

// The client resolves to exactly what the handler must return: both read the same descriptor.
expectTypeOf<Awaited<ReturnType<YelloClient['rpc']['streams']['get']>>>().toEqualTypeOf<Result<'streams.get'>>();
expectTypeOf<Result<'streams.get'>>().toEqualTypeOf<StreamState>();
expectTypeOf<Awaited<ReturnType<YelloClient['rpc']['chats']['list']>>>().toEqualTypeOf<Awaited<ReturnType<Handler<'chats.list'>>>>();

// Below the handlers, services take domain values: positions and generations are numbers, and
// defaults are already applied (the handler edge converts the decimal strings of the wire).
type AppendIn = Parameters<StreamStore['append']>[1];
type WaitingReadIn = Parameters<ChatReader['read']>[1];
type CheckpointIn = Parameters<typeof streamCheckpoint>[3];
expectTypeOf<[AppendIn['generation'], AppendIn['expectedPosition']]>().toEqualTypeOf<[number, number]>();
expectTypeOf<Parameters<StreamStore['read']>[1]>().toEqualTypeOf<{
  streamId: string;
  generation: number;
  fromPosition: number;
  limit: number;
  maxBytes: number;
}>();
expectTypeOf<[WaitingReadIn['generation'], WaitingReadIn['fromPosition'], WaitingReadIn['waitMs']]>().toEqualTypeOf<
  [number, number, number]
>();
expectTypeOf<Parameters<ChatReader['history']>[1]['limit']>().toEqualTypeOf<number>();
expectTypeOf<Parameters<StreamStore['trim']>[1]>().toEqualTypeOf<number>();
expectTypeOf<[CheckpointIn['generation'], CheckpointIn['fromPosition']]>().toEqualTypeOf<[number, number | undefined]>();
