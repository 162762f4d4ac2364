/**
 * The state model of one bridge: the lifecycle phase the supervisor's loop is in, and what holds its session (an
 * operator's pause, the watchdog, the cache, the target's flow control or fullness, the cache horizon), folded into
 * the one state operators read (`/bridges`, the state gauge) and the readiness that /health/ready answers from it.
 * Pure functions: the supervisor (../supervisor.ts) gathers the inputs and keeps the result.
 */
import type { BridgeState } from '../metrics.js';

/**
 * Where the supervisor's loop is; `connected` = a session is open (the conditions below then say what holds it);
 * `standby` = another process consumes the source exclusively (source.exclusive), and this one waits to take over.
 */
export type Phase = 'starting' | 'connected' | 'standby' | 'reconnecting' | 'stopped' | 'failed';

/** What a session reports of itself (BridgeSession.conditions). */
export interface SessionConditions {
  paused: boolean;
  blocked: boolean;
  cacheDown: boolean;
  targetFullSince: number | undefined;
}

export interface StateInputs {
  phase: Phase;
  operatorPaused: boolean;
  stalled: boolean;
  /** The open session's conditions; undefined when no session is open. */
  session: SessionConditions | undefined;
  /** The supervisor's own cache probe failed. */
  cacheProbeDown: boolean;
  cacheUntrusted: boolean;
  horizonShort: boolean;
}

/** The first that applies wins: stopped/failed, paused, stalled, not connected, cache-down, blocked, target-full, … */
export function computeState(s: StateInputs): BridgeState {
  const phase = s.phase;
  if (phase === 'stopped' || phase === 'failed') return phase;
  if (s.operatorPaused) return 'paused';
  if (phase === 'standby') return 'standby';
  if (s.stalled) return 'stalled';
  if (phase !== 'connected' || !s.session) return phase === 'connected' ? 'reconnecting' : phase;
  const c = s.session;
  if (c.cacheDown || s.cacheProbeDown) return 'cache-down';
  if (c.blocked) return 'blocked';
  if (c.targetFullSince !== undefined) return 'target-full';
  if (s.cacheUntrusted) return 'cache-untrusted';
  if (s.horizonShort) return 'cache-horizon-short';
  return 'running';
}

export interface Readiness {
  ready: boolean;
  /** Why not, one sentence each. */
  reasons: string[];
}

/**
 * Ready = not paused by an operator and connected (source, target, cache), or paused, or standing by for an exclusive
 * source (a standby is how the deployment is meant to be); and not stalled.
 */
export function readinessOf(
  bridgeName: string,
  state: BridgeState,
  phase: Phase,
  operatorPaused: boolean,
  lastErrorMessage: string | undefined,
): Readiness {
  const who = `bridge '${bridgeName}'`;
  if (operatorPaused && phase !== 'stopped' && phase !== 'failed') return { ready: true, reasons: [] };
  const error = lastErrorMessage !== undefined ? `: ${lastErrorMessage}` : '';
  switch (state) {
    case 'running':
    case 'cache-untrusted':
    case 'cache-horizon-short':
    case 'blocked':
    case 'target-full':
    case 'paused':
    case 'standby':
      return { ready: true, reasons: [] };
    case 'cache-down':
      return { ready: false, reasons: [`${who}: the duplicate-ID cache (Redis) is unreachable; messages are held until it answers`] };
    case 'stalled':
      return { ready: false, reasons: [`${who} is stalled${error}`] };
    case 'starting':
      return { ready: false, reasons: [`${who} is starting${error}`] };
    case 'reconnecting':
      return { ready: false, reasons: [`${who} is reconnecting${error}`] };
    case 'stopped':
      return { ready: false, reasons: [`${who} has stopped`] };
    case 'failed':
      return { ready: false, reasons: [`${who} has failed${error}`] };
  }
}
