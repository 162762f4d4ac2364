/**
 * The log lines of a detected or suspected loss of the Redis duplicate-ID cache (docs/design.md §4.4, ./epochs.ts): what
 * happened, what it means for re-sent IDs and redelivered copies, and until when copies are flagged. An error for a
 * loss, a warning for a first contact without history (a new deployment cannot be told from a loss while no bridge ran).
 */
import type { Logger } from '../shared/log.js';
import type { EpochReport } from './epochs.js';

export function logLoss(log: Logger, where: string, r: EpochReport): void {
  const until = new Date(r.flagUntil).toISOString();
  switch (r.event) {
    case 'data-lost':
      log.error(
        { address: r.name, flagUntil: until },
        `the duplicate-ID cache of '${r.name}' in ${where} was lost (a Redis restart without persistence, a flush, an eviction, or a failover to a replica without it): re-sent IDs may pass, and redelivered copies the cache no longer vouches for are flagged as possible duplicates until ${until}`,
      );
      break;
    case 'server-changed':
      log.error(
        { address: r.name, flagUntil: until },
        `another Redis server now holds the duplicate-ID cache of '${r.name}' in ${where} (a restart, a failover or a slot migration), which may lack the latest writes: redelivered copies the cache does not vouch for are flagged as possible duplicates until ${until}`,
      );
      break;
    case 'no-history':
      log.warn(
        { address: r.name, flagUntil: until },
        `the duplicate-ID cache of '${r.name}' in ${where} has no earlier record: a new deployment, or a Redis that lost its data while no bridge ran; redelivered copies the cache does not vouch for are flagged as possible duplicates until ${until}`,
      );
      break;
  }
}
