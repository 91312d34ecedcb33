/**
 * Plain code-unit order of two strings, for sort(). Not localeCompare: an order must not depend
 * on the host's locale where it feeds signed or hashed data, and the first localeCompare of a
 * process loads ICU's collation, about 10 ms of a command's start (issue 54). ISO 8601 times of
 * one format (`toISOString()`) sort as times in it.
 */
export function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
