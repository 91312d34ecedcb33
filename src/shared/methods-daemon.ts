import { z } from 'zod';
import { defineMethod } from './method-descriptor.js';
import type { BackupManifest, DaemonStatus, HelloResult, MetricsScrape } from './results.js';
import { label, opt } from './schema-parts.js';
import type { DoctorReport, Jwks } from './types.js';

/**
 * The session and the daemon itself: hello, status, metrics, the whole-store check, backup,
 * and the signing keys. Most are the admin's (yello status, metrics, doctor, backup, keys).
 * Part of the method table (methods.ts), in the API document's order.
 */
export const daemonMethods = [
  defineMethod<HelloResult>()({
    name: 'session.hello',
    access: 'public',
    params: z.strictObject({ token: z.string().min(1).max(1024), client: opt(z.unknown()) }),
    summary: 'Authenticate this connection with an agent or admin token.',
    result: '{role, agentId?, protocol, daemon: {version}, limits, signing: {kid, alg}}',
  }),
  defineMethod<DaemonStatus>()({
    name: 'daemon.status',
    access: 'authenticated',
    params: z.strictObject({}),
    summary: 'Version, uptime, counts, storage state, active kid and corrupt streams.',
    result: '{version, uptimeMs, counts, storage, commits, kid, policy, integrity}',
  }),
  defineMethod<MetricsScrape>()({
    name: 'daemon.metrics',
    access: 'admin',
    params: z.strictObject({}),
    summary:
      "One Prometheus scrape (yello metrics): the text exposition of the daemon's counters, histograms and gauges; no ids, content or secrets.",
    result: '{contentType, text}',
  }),
  defineMethod<DoctorReport>()({
    name: 'daemon.check',
    access: 'admin',
    params: z.strictObject({ mark: opt(z.boolean()) }),
    summary:
      'Scan the whole store (yello doctor): checksums, heads against records, signatures, operations, indexes; marks damaged streams corrupt unless mark is false.',
    result: 'DoctorReport',
  }),
  defineMethod<BackupManifest>()({
    name: 'daemon.backup',
    access: 'admin',
    params: z.strictObject({ path: label(4096).min(1) }),
    summary:
      'Write a consistent copy of the store (one LevelDB snapshot), the signing keys, the admin token and the token secret to a new directory (yello backup); returns its manifest.',
    result: 'BackupManifest',
  }),
  defineMethod<Jwks>()({
    name: 'keys.list',
    access: 'authenticated',
    params: z.strictObject({}),
    summary: 'The JWKS of every signing key, active and retired.',
    result: 'Jwks',
  }),
  defineMethod<{ kid: string }>()({
    name: 'keys.rotate',
    access: 'admin',
    params: z.strictObject({}),
    summary: 'Generate a new signing key; new records are signed with it.',
    result: '{kid}',
  }),
] as const;
