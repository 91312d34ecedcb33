import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { errorCode, errorMessage, errorStack } from './error-fields.js';
import { EXIT_CODES } from './exit-codes.js';

/**
 * A daemon that owns acknowledged writes must not limp on after an error nobody handled, nor
 * vanish without a word: log it (with a correlation id, no content) and exit with
 * EXIT_CODES.internal, which systemd restarts. Every path in the daemon is meant to handle its
 * own errors; this is the net under them.
 */
export function installProcessGuards(log: Logger, exit: (code: number) => void = (code) => process.exit(code)): () => void {
  const fatal = (kind: string) => (err: unknown) => {
    log.fatal(
      {
        correlationId: randomUUID(),
        kind,
        err: { message: errorMessage(err) ?? String(err), code: errorCode(err), stack: errorStack(err) },
      },
      `${kind}: exiting`,
    );
    exit(EXIT_CODES.internal);
  };
  const onRejection = fatal('unhandled rejection');
  const onException = fatal('uncaught exception');
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  return () => {
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onException);
  };
}
