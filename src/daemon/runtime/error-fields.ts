// What to log about a thrown value. Anything can be thrown (an Error, an errno error, a string,
// null), so these read a property only when the value is an object that has it as a string.

/** The `message` of a thrown value, if it has one. */
export function errorMessage(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'message' in err && typeof err.message === 'string' ? err.message : undefined;
}

/** The `code` of a thrown value (errno and LevelDB errors carry one), if it has one. */
export function errorCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string' ? err.code : undefined;
}

/** The `stack` of a thrown value, if it has one. */
export function errorStack(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'stack' in err && typeof err.stack === 'string' ? err.stack : undefined;
}
