/**
 * Who paused a bridge and for how long (docs/design.md §11: state an operator sets is declared). `state: paused` in
 * bridges.yaml is declared: it holds across restarts and is applied again at every reload, where the file wins. A
 * pause through the API (POST /bridges/{name}/pause) lasts until the next reload or restart; so does a resume through
 * the API of a bridge the file declares paused.
 */

export type DeclaredState = 'running' | 'paused';

/** What /bridges/{name} shows of a pause; null while the bridge is not paused. */
export interface PauseInfo {
  by: 'api' | 'config';
  lasts: 'until-restart' | 'declared';
}

export class PauseState {
  /** Written here only; read by every session of the bridge (SessionDeps.pause). */
  readonly switch = { paused: false };
  private by: PauseInfo['by'] | undefined;

  constructor(private declaredState: DeclaredState) {
    if (declaredState === 'paused') this.set(true, 'config');
  }

  get paused(): boolean {
    return this.switch.paused;
  }

  /** What the file declares (the last one loaded). */
  get declared(): DeclaredState {
    return this.declaredState;
  }

  /** An operator's command through the API: until the next reload or restart. True when it changed `paused`. */
  command(paused: boolean): boolean {
    // A pause the file declares stays declared when the API asks for it again.
    if (paused && this.switch.paused) return false;
    return this.set(paused, 'api');
  }

  /** A reload's declaration: the file wins over what the API set. True when it changed `paused`. */
  declare(state: DeclaredState): boolean {
    this.declaredState = state;
    return this.set(state === 'paused', 'config');
  }

  /** What /bridges/{name} shows of it (./status.ts). */
  get status(): { paused: boolean; pause: PauseInfo | null; declaredState: DeclaredState } {
    return { paused: this.switch.paused, pause: this.info, declaredState: this.declaredState };
  }

  get info(): PauseInfo | null {
    if (!this.switch.paused || this.by === undefined) return null;
    return { by: this.by, lasts: this.by === 'config' ? 'declared' : 'until-restart' };
  }

  private set(paused: boolean, by: PauseInfo['by']): boolean {
    const changed = paused !== this.switch.paused;
    this.switch.paused = paused;
    this.by = paused ? by : undefined;
    return changed;
  }
}
