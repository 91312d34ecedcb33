// The package's public entry (src/client/index.ts, built to dist/client/index.js and named by
// package.json "exports") exports exactly the curated list of values: an accidental export
// fails here. The type-level tests in types.test-d.ts are compiled here as well.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import * as client from '../../src/client/index.js';
import { repoRoot } from '../helpers/daemon-process.js';

const EXPECTED_VALUES = [
  'ChatWriter',
  'ConnectionLostError',
  'ConnectionPool',
  'ContinuityBreakError',
  'Conversation',
  'Coordinator',
  'CoordinatorPausedError',
  'DEFAULT_CALL_TIMEOUT_MS',
  'DEFAULT_MAX_INBOUND_LINE_BYTES',
  'DuplicateMessageError',
  'ExportVerifier',
  'FencedError',
  'FileCursorStore',
  'Inbox',
  'InternalError',
  'InvalidParamsError',
  'InvalidReceiptError',
  'LineTooLargeError',
  'MemoryCursorStore',
  'NotFollowedError',
  'NotFoundError',
  'OperationConflictError',
  'PermissionDeniedError',
  'PolicyRejectedError',
  'PositionMismatchError',
  'QuotaExceededError',
  'RateLimitedError',
  'RemoteError',
  'RequestTooLargeError',
  'StorageFailureError',
  'TimeoutError',
  'UnauthenticatedError',
  'UntrustedSocketError',
  'VerificationError',
  'WriterActiveError',
  'YelloClient',
  'YelloClientError',
  'defaultSocketPath',
  'receiptFor',
  'remoteError',
  'toMessageBatch',
  'verifyCheckpoint',
  'verifyExport',
  'verifyRecord',
];

const REMOTE_ERRORS = [
  'FencedError',
  'PositionMismatchError',
  'ContinuityBreakError',
  'InvalidParamsError',
  'UnauthenticatedError',
  'PermissionDeniedError',
  'NotFoundError',
  'RequestTooLargeError',
  'WriterActiveError',
  'OperationConflictError',
  'DuplicateMessageError',
  'InvalidReceiptError',
  'PolicyRejectedError',
  'RateLimitedError',
  'QuotaExceededError',
  'StorageFailureError',
  'InternalError',
] as const;

describe('public entry', () => {
  it('src/client/index.ts exports exactly the curated values', () => {
    expect(Object.keys(client).sort()).toEqual(EXPECTED_VALUES);
  });

  it('the built entry named by package.json "exports" exports the same values', async () => {
    const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as {
      exports: Record<string, { default: string; types: string }>;
    };
    const entry = path.join(repoRoot, pkg.exports['.']!.default);
    const built = (await import(pathToFileURL(entry).href)) as Record<string, unknown>;
    expect(Object.keys(built).sort()).toEqual(EXPECTED_VALUES);
    expect(readFileSync(path.join(repoRoot, pkg.exports['.']!.types), 'utf8')).toContain('YelloClient');
  });

  it('every remote error class extends RemoteError, and the client-side ones do not', () => {
    const values = client as unknown as Record<string, new (...args: never[]) => unknown>;
    for (const name of REMOTE_ERRORS) {
      expect(values[name]!.prototype, name).toBeInstanceOf(client.RemoteError);
      expect(values[name]!.prototype, name).toBeInstanceOf(client.YelloClientError);
    }
    for (const name of [
      'ConnectionLostError',
      'LineTooLargeError',
      'TimeoutError',
      'UntrustedSocketError',
      'CoordinatorPausedError',
      'VerificationError',
    ]) {
      expect(values[name]!.prototype, name).toBeInstanceOf(client.YelloClientError);
      expect(values[name]!.prototype, name).not.toBeInstanceOf(client.RemoteError);
    }
    // Each data.type maps to its class, with its name.
    for (const name of REMOTE_ERRORS) {
      const type = name
        .replace(/Error$/, '')
        .replace(/([a-z])([A-Z])/g, '$1_$2')
        .toUpperCase();
      const err = client.remoteError({ code: 1, message: 'm', data: { type } });
      expect(err.constructor, type).toBe(values[name]);
      expect(err.name).toBe(name);
    }
  });

  it('the type-level tests (types.test-d.ts) compile', () => {
    const configPath = path.join(repoRoot, 'test/tsconfig.json');
    const parsed = ts.getParsedCommandLineOfConfigFile(configPath, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
    expect(parsed).toBeDefined();
    const program = ts.createProgram({
      rootNames: [path.join(repoRoot, 'test/client/types.test-d.ts')],
      options: { ...parsed!.options, noEmit: true },
    });
    const problems = ts.getPreEmitDiagnostics(program).map((d) => {
      const where =
        d.file && d.start !== undefined
          ? `${path.relative(repoRoot, d.file.fileName)}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}`
          : '';
      return `${where} ${ts.flattenDiagnosticMessageText(d.messageText, '\n').slice(0, 500)}`;
    });
    expect(problems).toEqual([]);
  }, 60_000);
});
