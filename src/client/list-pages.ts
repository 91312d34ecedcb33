/** The largest page a list method gives (docs/protocol.md §6.2). */
export const LIST_PAGE = 500;

/**
 * Every item of a paginated list method (`agents.list`, `grants.list`, `chats.list`,
 * `operations.list`), page by page, following `nextCursor` to the end, or until at least `cap`
 * items are in hand (the caller then knows there may be more).
 */
export async function allPages<P extends { nextCursor: string | null }, T>(
  page: (cursor: { cursor?: string }) => Promise<P>,
  items: (p: P) => T[],
  cap = Infinity,
): Promise<T[]> {
  const out: T[] = [];
  let cursor: string | null = null;
  do {
    const p: P = await page(cursor === null ? {} : { cursor });
    out.push(...items(p));
    cursor = p.nextCursor;
  } while (cursor !== null && out.length < cap);
  return out;
}
