import type { TokenCodec } from './token-codec.js';

/** What a batchId binds: who was shown which range of which stream generation. */
export interface BatchBinding {
  reader: string;
  streamId: string;
  generation: number;
  fromPosition: number;
  nextPosition: number;
}

const BATCH_KIND = 'batch';

/** The batchId of a presented range: a receipt must quote one to acknowledge it. */
export function sealBatchId(codec: TokenCodec, b: BatchBinding): string {
  return codec.seal(BATCH_KIND, [b.reader, b.streamId, b.generation, b.fromPosition, b.nextPosition]);
}

/** The binding of a batchId this daemon issued, or null when it is not one. */
export function openBatchId(codec: TokenCodec, token: string): BatchBinding | null {
  const v = codec.open(BATCH_KIND, token);
  if (!Array.isArray(v) || v.length !== 5) return null;
  const [reader, streamId, generation, fromPosition, nextPosition] = v as [string, string, number, number, number];
  return { reader, streamId, generation, fromPosition, nextPosition };
}
