// The checksummed value encoding is engine-neutral (the PostgreSQL rows use it too); LevelDB's
// modules keep importing it from here.
export { decodeValue, encodeValue } from '../value-codec.js';
