/** The storage port (docs/design/storage-port.md): interfaces and plain values, no engine. */
export type * from './values.js';
export * from './stream-port.js';
export type * from './directory-port.js';
export type * from './store-port.js';
