/** Daemon version reported by `session.hello` and `daemon.status`. */
export const VERSION = '0.1.0';
