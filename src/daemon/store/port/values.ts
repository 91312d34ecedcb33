/**
 * The plain values the storage port takes and gives (docs/design/storage-port.md). Nothing here
 * names an engine: no keys, no batches, no LevelDB or SQL types. Each backend stores these
 * values its own way and gives back exactly what it was given.
 */
import type { JsonWebKey } from 'node:crypto';
import type { Grant } from '../../../shared/results.js';
import type { Agent } from '../../../shared/types.js';

export type { StoredRecord } from '../../../shared/types.js';
export type { Grant } from '../../../shared/results.js';
export type { StreamMeta, SealedGeneration } from '../stream-meta.js';
export type { StoredOperation } from '../record-layout.js';

/** An agent as stored: the public agent plus the hash of its current bearer token. */
export interface AgentRow extends Agent {
  tokenHash: string;
}

/** A chat as stored (`agentAId < agentBId`); the expanded agents are joined on read. */
export interface ChatRow {
  id: string;
  agentAId: string;
  agentBId: string;
  createdAt: string;
}

/**
 * A stream generation the daemon cannot vouch for from `fromPosition` on (store/integrity.ts
 * keeps them in memory and decides with them; the port only stores them).
 */
export interface CorruptMark {
  streamId: string;
  /** null: the head itself is unreadable, so no generation of the stream can be trusted. */
  generation: number | null;
  fromPosition: number;
  /** What was found, for people. */
  detail: string;
  detectedAt: string;
}

/** The counts of `daemon.status`. */
export interface StoreCounts {
  agents: number;
  chats: number;
  streams: number;
  records: number;
}

/** A daemon's public signing key as published for every verifier of the deployment (`keys.list`). */
export interface PublicKeyRow {
  kid: string;
  /** Which daemon's key it is (its data dir's identity); one row per kid. */
  daemonId: string;
  jwk: JsonWebKey;
  createdAt: string;
  /** When the key stopped signing; retired keys stay listed so old records still verify. */
  retiredAt: string | null;
}

/** Synced writes the backend made since it opened (`daemon.status`, metrics, benchmarks). */
export interface CommitStats {
  /** Group commits (LevelDB synced batches, PostgreSQL transactions). */
  batches: number;
  /** Changes in them. */
  writes: number;
  /** Backend housekeeping runs (LevelDB: log checkpoints; others may leave it 0). */
  checkpoints: number;
}

/** Re-exported so the port's files can name the grant row without reaching into src/shared. */
export type GrantRow = Grant;

/** One write-ahead-log loss the daemon found and acted on (stored, so it is acted on once). */
export interface WalIncident {
  detectedAt: string;
  /** LevelDB's own report lines. */
  lines: string[];
  bytes: number;
  /** Stream generations marked corrupt because of it. */
  streams: number;
  /** The guard file was damaged too, so every stream was marked. */
  guardDamaged: boolean;
}
