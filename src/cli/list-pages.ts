/** The largest page a list method gives (docs/protocol.md §6.2): the CLI pages through all of them. */
export const CLI_PAGE = 500;

/** Every item of a paginated list method, page by page, following `nextCursor` to the end. */
export async function allPages<P extends { nextCursor: string | null }, T>(
  page: (cursor: { cursor?: string }) => Promise<P>,
  items: (p: P) => T[],
): Promise<T[]> {
  const out: T[] = [];
  let cursor: string | null = null;
  do {
    const p: P = await page(cursor === null ? {} : { cursor });
    out.push(...items(p));
    cursor = p.nextCursor;
  } while (cursor !== null);
  return out;
}
