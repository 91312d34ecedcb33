import { pino, type DestinationStream, type Logger } from 'pino';

/**
 * pino JSON, one line per event: on stdout (the process's log), or on `destination` (a daemon
 * run inside another process, such as a test worker, keeps its lines apart). Redaction is a
 * second line of defence: code never logs tokens, keys or content in the first place.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service: 'yellod', pid: process.pid },
    redact: {
      paths: ['token', '*.token', 'coordinatorToken', '*.coordinatorToken', 'content', '*.content', 'params'],
      censor: '[redacted]',
    },
  };
  return destination ? pino(options, destination) : pino(options);
}
