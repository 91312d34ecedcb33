// Type-level tests of the client's public surface (src/client/index.ts). They run as part of
// `npm run typecheck` / `vitest --typecheck`, and public-api.test.ts compiles this file too, so
// a plain `vitest run test/client` fails when a type drifts.

import { describe, expectTypeOf, it } from 'vitest';
import {
  ConnectionLostError,
  ContinuityBreakError,
  Coordinator,
  CoordinatorPausedError,
  DuplicateMessageError,
  FencedError,
  FileCursorStore,
  InternalError,
  InvalidParamsError,
  InvalidReceiptError,
  MemoryCursorStore,
  NotFoundError,
  OperationConflictError,
  PermissionDeniedError,
  PolicyRejectedError,
  PositionMismatchError,
  RateLimitedError,
  RemoteError,
  RequestTooLargeError,
  StorageFailureError,
  TimeoutError,
  UnauthenticatedError,
  VerificationError,
  WriterActiveError,
  YelloClient,
  YelloClientError,
  verifyRecord,
  type AppendResult,
  type ChatBatchNotification,
  type ChatBreakNotification,
  type CoordinatorEvents,
  type CoordinatorState,
  type CursorStore,
  type HelloResult,
  type Jwks,
  type MessageBatch,
  type OperationInfo,
  type ParamsIn,
  type PeerBatch,
  type StoredRecord,
  type StreamState,
  type UncertainOutcome,
  type YelloErrorType,
} from '../../src/client/index.js';

declare const client: YelloClient;
declare const coord: Coordinator;

describe('YelloClient types', () => {
  it('rpc.streams.append takes the append params and resolves to an AppendResult', () => {
    type AppendParams = Parameters<YelloClient['rpc']['streams']['append']>[0];
    expectTypeOf(client.rpc.streams.append).parameter(0).toEqualTypeOf<ParamsIn<'streams.append'>>();
    expectTypeOf(client.rpc.streams.append).returns.toEqualTypeOf<Promise<AppendResult>>();
    expectTypeOf<AppendParams>().toMatchObjectType<{
      streamId: string;
      coordinatorToken: string;
      generation: string;
      expectedPosition: string;
      operationId: string;
    }>();
    type RecordIn = AppendParams['records'][number];
    expectTypeOf<RecordIn['type']>().toEqualTypeOf<'chat.message' | 'chat.receipt'>();
    expectTypeOf<Extract<RecordIn, { type: 'chat.message' }>>().toEqualTypeOf<{
      type: 'chat.message';
      messageId: string;
      content: string;
    }>();
    expectTypeOf<Extract<RecordIn, { type: 'chat.receipt' }>>().toEqualTypeOf<{
      type: 'chat.receipt';
      peerStreamId: string;
      peerGeneration: string;
      nextPosition: string;
      batchId: string;
    }>();
    expectTypeOf<AppendResult>().toEqualTypeOf<{
      streamId: string;
      generation: string;
      operationId: string;
      firstPosition: string;
      nextPosition: string;
      records: StoredRecord[];
      duplicate: boolean;
      redactions: { recordIndex: number; kind: string; count: number }[];
    }>();

    // Positions are strings, and every required field is required.
    const never = (): void => {
      void client.rpc.streams.append({
        streamId: 's',
        coordinatorToken: 't',
        generation: '1',
        // @ts-expect-error expectedPosition must be a decimal string, not a number
        expectedPosition: 0,
        operationId: 'o',
        records: [],
      });
      // @ts-expect-error coordinatorToken is required
      void client.rpc.streams.append({ streamId: 's', generation: '1', expectedPosition: '0', operationId: 'o', records: [] });
      void client.rpc.streams.append({
        streamId: 's',
        coordinatorToken: 't',
        generation: '1',
        expectedPosition: '0',
        operationId: 'o',
        // @ts-expect-error an unknown record type
        records: [{ type: 'chat.note' }],
      });
      // No such method in the namespace.
      expectTypeOf(client.rpc.streams).not.toHaveProperty('delete');
    };
    expectTypeOf(never).toBeFunction();
  });

  it('call("chats.history", …) resolves to {entries, nextCursor, liveCursor}', () => {
    const history = () => client.call('chats.history', { chatId: 'chat_x', limit: 10, direction: 'backward' });
    expectTypeOf(history).returns.resolves.toEqualTypeOf<{ entries: StoredRecord[]; nextCursor: string | null; liveCursor: string }>();
    expectTypeOf(history).returns.resolves.toHaveProperty('entries').toEqualTypeOf<StoredRecord[]>();
    expectTypeOf(history).returns.resolves.toHaveProperty('nextCursor').toEqualTypeOf<string | null>();
    expectTypeOf(history).returns.resolves.toHaveProperty('liveCursor').toEqualTypeOf<string>();
    // The typed rpc form agrees with call().
    expectTypeOf(client.rpc.chats.history).returns.toEqualTypeOf<ReturnType<typeof history>>();
    const never = (): void => {
      // @ts-expect-error direction is 'backward' | 'forward'
      void client.call('chats.history', { chatId: 'c', direction: 'sideways' });
      // @ts-expect-error no such method
      void client.call('chats.delete', { chatId: 'c' });
    };
    expectTypeOf(never).toBeFunction();
  });

  it('other results are typed too', () => {
    expectTypeOf(client.rpc.streams.get).returns.resolves.toEqualTypeOf<StreamState>();
    expectTypeOf(client.rpc.operations.get).returns.resolves.toEqualTypeOf<OperationInfo>();
    expectTypeOf(client.fetchJwks).returns.resolves.toEqualTypeOf<Jwks>();
    expectTypeOf(client.session).toEqualTypeOf<HelloResult>();
    expectTypeOf(YelloClient.connect).returns.resolves.toEqualTypeOf<YelloClient>();
    expectTypeOf(verifyRecord).parameters.toEqualTypeOf<[StoredRecord, Jwks]>();
    expectTypeOf(verifyRecord).returns.toBeVoid();
  });

  it('events carry their payload types', () => {
    client.on('chats.batch', (b) => expectTypeOf(b).toEqualTypeOf<ChatBatchNotification>());
    client.on('chats.break', (b) => expectTypeOf(b).toEqualTypeOf<ChatBreakNotification>());
    client.on('reconnected', (h) => expectTypeOf(h).toEqualTypeOf<HelloResult>());
    client.on('disconnected', (e) => expectTypeOf(e).toEqualTypeOf<Error>());
    expectTypeOf(client.on).returns.toEqualTypeOf<() => void>();
  });
});

describe('error class types', () => {
  it('every remote error class extends RemoteError, which extends YelloClientError', () => {
    expectTypeOf<RemoteError>().toExtend<YelloClientError>();
    expectTypeOf<YelloClientError>().toExtend<Error>();
    expectTypeOf(FencedError).instance.toExtend<RemoteError>();
    expectTypeOf(PositionMismatchError).instance.toExtend<RemoteError>();
    expectTypeOf(ContinuityBreakError).instance.toExtend<RemoteError>();
    expectTypeOf(InvalidParamsError).instance.toExtend<RemoteError>();
    expectTypeOf(UnauthenticatedError).instance.toExtend<RemoteError>();
    expectTypeOf(PermissionDeniedError).instance.toExtend<RemoteError>();
    expectTypeOf(NotFoundError).instance.toExtend<RemoteError>();
    expectTypeOf(RequestTooLargeError).instance.toExtend<RemoteError>();
    expectTypeOf(WriterActiveError).instance.toExtend<RemoteError>();
    expectTypeOf(OperationConflictError).instance.toExtend<RemoteError>();
    expectTypeOf(DuplicateMessageError).instance.toExtend<RemoteError>();
    expectTypeOf(InvalidReceiptError).instance.toExtend<RemoteError>();
    expectTypeOf(PolicyRejectedError).instance.toExtend<RemoteError>();
    expectTypeOf(RateLimitedError).instance.toExtend<RemoteError>();
    expectTypeOf(StorageFailureError).instance.toExtend<RemoteError>();
    expectTypeOf(InternalError).instance.toExtend<RemoteError>();
  });

  it('client-side errors are YelloClientErrors but not RemoteErrors', () => {
    expectTypeOf<ConnectionLostError>().toExtend<YelloClientError>();
    expectTypeOf<ConnectionLostError>().not.toExtend<RemoteError>();
    expectTypeOf<TimeoutError>().not.toExtend<RemoteError>();
    expectTypeOf<CoordinatorPausedError>().not.toExtend<RemoteError>();
    expectTypeOf<VerificationError>().not.toExtend<RemoteError>();
  });

  it('details have typed accessors', () => {
    expectTypeOf<RemoteError['code']>().toEqualTypeOf<number>();
    expectTypeOf<RemoteError['type']>().toEqualTypeOf<string>();
    expectTypeOf<RemoteError['data']>().toEqualTypeOf<Record<string, unknown>>();
    expectTypeOf<PositionMismatchError['nextPosition']>().toEqualTypeOf<string>();
    expectTypeOf<ContinuityBreakError['reason']>().toEqualTypeOf<'STREAM_MISSING' | 'GENERATION_CHANGED' | 'PREFIX_UNAVAILABLE'>();
    expectTypeOf<InvalidParamsError['path']>().toEqualTypeOf<string>();
    expectTypeOf<ConnectionLostError['outcomeUnknown']>().toEqualTypeOf<boolean>();
    expectTypeOf<CoordinatorPausedError['operationId']>().toEqualTypeOf<string>();
    expectTypeOf<VerificationError['position']>().toEqualTypeOf<string | null>();
    expectTypeOf<YelloClientError['transient']>().toEqualTypeOf<boolean>();
  });
});

describe('error types are a closed set', () => {
  it('every class has its own type, and a client error can only be made with a known one', () => {
    expectTypeOf<FencedError['type']>().toEqualTypeOf<'FENCED'>();
    expectTypeOf<ContinuityBreakError['type']>().toEqualTypeOf<'CONTINUITY_BREAK'>();
    expectTypeOf<StorageFailureError['type']>().toEqualTypeOf<'STORAGE_FAILURE'>();
    expectTypeOf<TimeoutError['type']>().toEqualTypeOf<'TIMEOUT'>();
    expectTypeOf<ConnectionLostError['type']>().toEqualTypeOf<'CONNECTION_LOST' | 'LINE_TOO_LARGE'>();
    expectTypeOf<CoordinatorPausedError['type']>().toEqualTypeOf<'PAUSED'>();
    expectTypeOf<VerificationError['type']>().toEqualTypeOf<'VERIFICATION_FAILED'>();
    expectTypeOf<ConstructorParameters<typeof YelloClientError>[0]>().toEqualTypeOf<YelloErrorType>();
    expectTypeOf<'FENCED' | 'TIMEOUT' | 'BAD_STATE'>().toExtend<YelloErrorType>();
    const never = (): void => {
      // @ts-expect-error not a type the client knows
      new YelloClientError('SOMETHING_ELSE', 'message');
      // @ts-expect-error a misspelt type
      new YelloClientError('BAD_STAT', 'message');
    };
    expectTypeOf(never).toBeFunction();
  });
});

describe('Coordinator types', () => {
  it('methods return what the contract says', () => {
    expectTypeOf(coord.start).returns.toEqualTypeOf<Promise<void>>();
    expectTypeOf(coord.stop).returns.toEqualTypeOf<Promise<void>>();
    expectTypeOf(coord.send).returns.toEqualTypeOf<Promise<AppendResult>>();
    expectTypeOf(coord.ack).returns.toEqualTypeOf<Promise<AppendResult>>();
    expectTypeOf(coord.reply).returns.toEqualTypeOf<Promise<AppendResult>>();
    expectTypeOf(coord.resolveUncertain).returns.toEqualTypeOf<Promise<UncertainOutcome>>();
    expectTypeOf(coord.done).toEqualTypeOf<Promise<void>>();
    expectTypeOf(coord.state).toEqualTypeOf<CoordinatorState>();
    expectTypeOf(coord.uncertainOperationId).toEqualTypeOf<string | null>();
    expectTypeOf(coord.ack).parameter(0).toEqualTypeOf<PeerBatch>();
    expectTypeOf(coord.reply).parameter(1).toEqualTypeOf<{ ack: PeerBatch; messageId?: string }>();
    expectTypeOf<PeerBatch>().toEqualTypeOf<MessageBatch>();
    expectTypeOf<UncertainOutcome>().toEqualTypeOf<{ operationId: string; committed: boolean; operation: OperationInfo }>();
  });

  it('states and events are closed sets', () => {
    expectTypeOf<CoordinatorState>().toEqualTypeOf<
      'idle' | 'starting' | 'running' | 'reconnecting' | 'paused' | 'fenced' | 'needs-intervention' | 'stopped'
    >();
    coord.on('state', (e) => {
      expectTypeOf(e.state).toEqualTypeOf<CoordinatorState>();
      expectTypeOf(e.previous).toEqualTypeOf<CoordinatorState>();
      expectTypeOf(e.error).toEqualTypeOf<Error | undefined>();
    });
    coord.on('presented', (b) => expectTypeOf(b).toEqualTypeOf<PeerBatch>());
    expectTypeOf<keyof CoordinatorEvents>().toEqualTypeOf<
      'state' | 'presented' | 'error' | 'peer-acknowledged' | 'peer-writer' | 'unsettled'
    >();
    const never = (): void => {
      // @ts-expect-error no such event
      coord.on('batch', () => {});
    };
    expectTypeOf(never).toBeFunction();
  });

  it('both cursor stores are CursorStores', () => {
    expectTypeOf<FileCursorStore>().toExtend<CursorStore>();
    expectTypeOf<MemoryCursorStore>().toExtend<CursorStore>();
    expectTypeOf<CursorStore['load']>().returns.toEqualTypeOf<Promise<string | null>>();
  });
});
