// vitest's asymmetric matchers, typed as what they are to the test. vitest declares
// `expect.any(String)`, `expect.stringMatching(…)` and `expect.objectContaining(…)` as `any`, so that
// they fit in any field of an expected object; `unknown` fits a toEqual/toMatchObject pattern just as
// well and keeps `any` out of the tests (no-unsafe-assignment).

import { expect } from 'vitest';

/** Matches any value made by `ctor` (`String`, `Number`, a class): `expect.any`. */
export function anyOf(ctor: unknown): unknown {
  return expect.any(ctor);
}

/** Matches a string that matches `re` (or contains the string `re`): `expect.stringMatching`. */
export function stringMatching(re: string | RegExp): unknown {
  return expect.stringMatching(re);
}

/** Matches an object that has at least these properties: `expect.objectContaining`. */
export function objectContaining(expected: Record<string, unknown>): unknown {
  return expect.objectContaining(expected);
}

/** Matches an array that contains at least these elements: `expect.arrayContaining`. */
export function arrayContaining(expected: unknown[]): unknown {
  return expect.arrayContaining(expected);
}
