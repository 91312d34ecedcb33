import { pino, type Logger } from 'pino';

/**
 * pino JSON on stdout, one line per event. Redaction is a second line of defence: code never
 * logs tokens, keys or content in the first place.
 */
export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: 'yellod', pid: process.pid },
    redact: {
      paths: ['token', '*.token', 'coordinatorToken', '*.coordinatorToken', 'content', '*.content', 'params'],
      censor: '[redacted]',
    },
  });
}
