// Types of stale-dist.mjs (plain ESM, run by `npm start` without a build).
export const repoRoot: string;
/** The first source file whose output is missing or older than it, or null when dist/ is current. */
export function staleSource(root?: string): string | null;
/** Builds dist/ when it is stale; the exit status (0: current or built). */
export function buildIfStale(root?: string): number;
