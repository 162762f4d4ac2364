/** What `check` reports (./check.ts, ./check-nats.ts). */
export type FindingLevel = 'ok' | 'info' | 'warning' | 'error';

/** One thing checked: what it was about (a connection, a bridge, the cache) and what was found, as a sentence. */
export interface Finding {
  level: FindingLevel;
  subject: string;
  message: string;
}
