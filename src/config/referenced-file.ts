/**
 * Reading a file the configuration names (./files.ts for password-file and tls:, a protocol's record for its own, such
 * as NATS's credentials-file in ./protocols/nats.ts): below both, so that a record reads its files without importing
 * ./files.ts, which reads the records. What a file holds is secret: no message here quotes it.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve as resolvePath } from 'node:path';
import type { ProblemCollector } from './problems.js';
import type { TlsConfig } from './types.js';

/** A key path in the file, where a problem with a file is located. */
export type Path = readonly (string | number)[];

/** What the files of one connection (or of the cache) held. */
export interface ConnectionFiles {
  /** From `password-file`, one trailing newline trimmed. */
  password?: string;
  tls?: TlsConfig;
  /** From a NATS connection's `credentials-file` (secret). */
  credentials?: string;
}

/** Why a file cannot be read, as a few words. */
function readFailure(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ENOENT':
      return 'no such file';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'EISDIR':
      return 'it is a directory';
    default:
      return code ?? (err instanceof Error ? err.message : String(err));
  }
}

/**
 * Reads a file named in the configuration (relative paths from the configuration file's folder). Reports a problem at
 * `path` and returns undefined when it cannot be read.
 */
export function readReferencedFile(name: string, baseDir: string, path: Path, out: ProblemCollector, what: string): string | undefined {
  const full = isAbsolute(name) ? name : resolvePath(baseDir, name);
  try {
    return readFileSync(full, 'utf8');
  } catch (err) {
    out.atValue(path, `cannot read ${what} ${full}: ${readFailure(err)}`);
    return undefined;
  }
}

export function urlHasUser(url: string): boolean {
  return URL.canParse(url) && new URL(url).username !== '';
}
