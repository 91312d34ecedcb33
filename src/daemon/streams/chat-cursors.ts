// The cursor tokens of chat reads, as sealed by TokenCodec, and the shape checks that open them:
// a token's MAC proves this daemon issued it, its shape is still checked before it is used.

/** A compound (live) cursor: per stream of the chat, the generation and next position. */
export interface LiveCursor {
  chatId: string;
  streams: Record<string, { generation: number; position: number }>;
}

/** A history cursor: the snapshot fixed by the first call and where paging stands in it. */
export interface HistoryCursor {
  c: string;
  d: 'backward' | 'forward';
  /** Per stream [A, B]: generation, snapshot head, snapshot first position, paging position. */
  g: [number, number];
  h: [number, number];
  f: [number, number];
  p: [number, number];
}

/** What a live cursor token seals: the chat, and per stream [generation, position]. */
export interface LiveBody {
  c: string;
  s: Record<string, unknown>;
}

export function isPair(v: unknown): v is [number, number] {
  return Array.isArray(v) && v.length === 2 && typeof v[0] === 'number' && typeof v[1] === 'number';
}

export function isLiveBody(v: unknown): v is LiveBody {
  return typeof v === 'object' && v !== null && 'c' in v && typeof v.c === 'string' && 's' in v && typeof v.s === 'object' && v.s !== null;
}

export function isHistoryCursor(v: unknown): v is HistoryCursor {
  return (
    typeof v === 'object' &&
    v !== null &&
    'c' in v &&
    typeof v.c === 'string' &&
    'd' in v &&
    (v.d === 'backward' || v.d === 'forward') &&
    'g' in v &&
    isPair(v.g) &&
    'h' in v &&
    isPair(v.h) &&
    'f' in v &&
    isPair(v.f) &&
    'p' in v &&
    isPair(v.p)
  );
}
