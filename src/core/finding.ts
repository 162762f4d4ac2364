/**
 * What `broker-bridge check` reports (src/service/check.ts). It sits in core, below the adapters, because each
 * protocol's record (src/endpoints/protocol.ts) makes its own findings: its check lives in its folder.
 */
export type FindingLevel = 'ok' | 'info' | 'warning' | 'error';

/** One thing checked: what it was about (a connection, a bridge, the cache) and what was found, as a sentence. */
export interface Finding {
  level: FindingLevel;
  subject: string;
  message: string;
}
