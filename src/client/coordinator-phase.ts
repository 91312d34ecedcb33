import type { CoordinatorState } from './coordinator-types.js';
import type { YelloClient } from './yello-client.js';

/**
 * What a Coordinator is doing, with the facts that hold only then. `operationId` is an append
 * of unknown outcome: it pauses the coordinator and outlives a reconnect, a failure and a stop
 * (`uncertainOperationId` keeps reporting it). `client` is the connection in use, if any.
 */
export type Phase =
  | { type: 'idle' }
  | { type: 'starting'; client: YelloClient | null }
  | { type: 'running'; client: YelloClient }
  | { type: 'paused'; client: YelloClient; operationId: string }
  /** Dialling again (`attempt` from 1); `client` is the candidate connection being set up. */
  | { type: 'reconnecting'; attempt: number; client: YelloClient | null; operationId: string | null }
  | { type: 'fenced' | 'needs-intervention'; error: Error; client: YelloClient | null; operationId: string | null }
  /** `terminal`: the failure it stopped after, which `done` rejects with. */
  | { type: 'stopped'; terminal: Error | null; operationId: string | null };

/**
 * The public state of a phase: its type, except that reconnecting with an append of unknown
 * outcome still reads `paused` (the pause, not the connection, is what the agent must act on).
 */
export function stateOf(phase: Phase): CoordinatorState {
  return phase.type === 'reconnecting' && phase.operationId !== null ? 'paused' : phase.type;
}

/** Stopped, or stopped for a human: nothing moves it on. */
export function isTerminal(phase: Phase): phase is Extract<Phase, { type: 'fenced' | 'needs-intervention' | 'stopped' }> {
  return phase.type === 'stopped' || phase.type === 'fenced' || phase.type === 'needs-intervention';
}

/** The connection a phase uses, if any. */
export function clientOf(phase: Phase): YelloClient | null {
  return 'client' in phase ? phase.client : null;
}

/** The append of unknown outcome a phase carries, if any. */
export function uncertainOf(phase: Phase): string | null {
  return 'operationId' in phase ? phase.operationId : null;
}

/** The failure that ended a phase for a human (fenced, needs-intervention, or stopped after one). */
export function failureOf(phase: Phase): Error | null {
  if (phase.type === 'stopped') return phase.terminal;
  return phase.type === 'fenced' || phase.type === 'needs-intervention' ? phase.error : null;
}
