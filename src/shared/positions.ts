/**
 * The order of places in a chat stream. A stream's records are numbered per generation, and a
 * reset starts a new generation from its own position 0, so a place is a (generation,
 * position) pair compared generations first. Both are decimal u64 strings on the wire; they
 * are compared as BigInt, never as text or Number.
 */

/** A place in a stream: `position` of `generation`. */
export interface StreamPlace {
  generation: string;
  position: string;
}

/** Negative when `a` lies before `b`, 0 at the same place, positive after it. */
export function comparePlaces(a: StreamPlace, b: StreamPlace): number {
  const ga = BigInt(a.generation);
  const gb = BigInt(b.generation);
  if (ga !== gb) return ga < gb ? -1 : 1;
  const pa = BigInt(a.position);
  const pb = BigInt(b.position);
  return pa === pb ? 0 : pa < pb ? -1 : 1;
}

/** Whether the end `a` (where a batch, a receipt or a read stops) lies after `b` (generations first). */
export function isAfter(a: { generation: string; nextPosition: string }, b: { generation: string; nextPosition: string }): boolean {
  return comparePlaces({ generation: a.generation, position: a.nextPosition }, { generation: b.generation, position: b.nextPosition }) > 0;
}
