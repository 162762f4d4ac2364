/**
 * Reload without restart (SIGHUP, POST /reload): the configuration file is read and validated again; a file that does
 * not validate is refused as a whole (its located errors logged and returned) and everything runs on as before. A
 * valid one is applied to the running bridges (./bridge-set.ts). What a reload cannot change in a running process —
 * the duplicate-ID cache (`id-cache`) and the HTTP API (`http-port`, `http-host`, `admin-token`) — refuses the
 * reload, saying so: a half-applied configuration would be a lie in /bridges.
 *
 * Each applied reload is a new generation: a counter and the SHA-256 of the file, shown by /bridges and `status`.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Config } from '../config/types.js';
import type { Logger } from '../shared/log.js';
import type { Metrics } from '../core/metrics.js';
import { loadConfig, warnings } from '../config/load.js';
import { ConfigError } from '../shared/errors.js';
import type { ApplyResult, BridgeSet } from './bridge-set.js';

export interface Generation {
  generation: number;
  /** SHA-256 of the configuration file's bytes, hex. */
  hash: string;
  loadedAt: string;
}

export type ReloadOutcome = ({ applied: true } & ApplyResult & Generation) | { applied: false; errors: string[]; generation: Generation };

export function fileHash(file: string): string {
  try {
    return createHash('sha256').update(readFileSync(file)).digest('hex');
  } catch {
    return 'unreadable';
  }
}

export class Reloader {
  private current: Config;
  private gen: Generation;
  private queue: Promise<unknown> = Promise.resolve();
  /** The warnings of the configuration in force, said already (at start or at a reload): not said again. */
  private warned: Set<string> | undefined;

  constructor(
    config: Config,
    private readonly deps: { set: BridgeSet; metrics: Metrics; log: Logger; env: () => Readonly<Record<string, string | undefined>> },
  ) {
    this.current = config;
    this.gen = { generation: 1, hash: fileHash(config.file), loadedAt: new Date().toISOString() };
  }

  get generation(): Generation {
    return this.gen;
  }

  /** One reload at a time: a second request waits for the first and then reads the file again. */
  reload(trigger: string): Promise<ReloadOutcome> {
    const next = this.queue.then(() => this.reloadNow(trigger));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async reloadNow(trigger: string): Promise<ReloadOutcome> {
    const { log, metrics } = this.deps;
    let next: Config;
    try {
      next = loadConfig(this.current.file, this.deps.env());
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      // The located problems, one per line after the heading (as `validate` prints them).
      const lines = err.message.split('\n').filter((l) => l.trim() !== '');
      return this.refused(trigger, lines.length > 1 ? lines.slice(1) : lines);
    }
    const fixed = this.unchangeable(next);
    if (fixed.length > 0) return this.refused(trigger, fixed);
    const hash = fileHash(next.file);
    const result = await this.deps.set.apply(next.bridges, next.shutdownTimeout);
    const said = this.warned ?? new Set(warnings(this.current));
    this.current = next;
    if (next.logLevel !== log.level) log.level = next.logLevel;
    this.gen = { generation: this.gen.generation + 1, hash, loadedAt: new Date().toISOString() };
    metrics.configReloads.inc({ result: 'applied' });
    // Only what is new: a reload of one bridge among a thousand says that bridge's warnings, not the 999 others' again.
    this.warned = new Set(warnings(next));
    for (const w of this.warned) if (!said.has(w)) log.warn({ file: next.file }, w);
    log.info({ trigger, ...result, generation: this.gen.generation, hash: hash.slice(0, 12) }, `configuration reloaded (${trigger}): generation ${this.gen.generation}`);
    return { applied: true, ...result, ...this.gen };
  }

  private refused(trigger: string, errors: string[]): ReloadOutcome {
    this.deps.metrics.configReloads.inc({ result: 'refused' });
    this.deps.log.error({ trigger, errors }, `configuration reload (${trigger}) refused, nothing changed: ${errors.join('; ')}`);
    return { applied: false, errors, generation: this.gen };
  }

  /** Keys a running process cannot take on, each as a sentence naming it. */
  private unchangeable(next: Config): string[] {
    const was = this.current;
    const out: string[] = [];
    const say = (key: string) => out.push(`${next.file}: ${key} changed, and a reload cannot apply it to a running process: restart broker-bridge for it`);
    if (JSON.stringify(next.idCache) !== JSON.stringify(was.idCache)) say('id-cache');
    if (next.httpPort !== was.httpPort) say('http-port');
    if (next.httpHost !== was.httpHost) say('http-host');
    if (next.adminToken !== was.adminToken) say('admin-token');
    return out;
  }
}
