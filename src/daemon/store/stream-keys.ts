// The keys of a stream's values, engine-neutral: LevelDB stores each value under its key
// (leveldb/key-layout.ts `K`), PostgreSQL binds each row body's checksum to the same key
// (postgres/row-codec.ts `RowKey`). One definition, because the checksum of every stored value
// covers its key: two copies that drifted apart would turn every read into CORRUPT.
//
// Ids never contain `/`; numbers are zero-padded so lexicographic order is numeric order.

const pad = (n: number) => n.toString().padStart(16, '0');

export const StreamKeys = {
  /** A stream's head. */
  stream: (streamId: string) => `s/${streamId}`,
  record: (streamId: string, generation: number, position: number) => `r/${streamId}/${pad(generation)}/${pad(position)}`,
  operation: (streamId: string, operationId: string) => `o/${streamId}/${operationId}`,
  opLog: (streamId: string, generation: number, position: number) => `ol/${streamId}/${pad(generation)}/${pad(position)}`,
  messageId: (streamId: string, generation: number, clientMessageId: string) => `x/${streamId}/${pad(generation)}/${clientMessageId}`,
  /** A corruption mark of a stream generation (generation 0: the whole stream, generation unknown). */
  corruptMark: (streamId: string, generation: number) => `k/${streamId}/${pad(generation)}`,
};
