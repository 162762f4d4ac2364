/**
 * How configuration problems are reported: one line each, `file:line:col key.path: what is wrong; what is valid`,
 * all of them at once, sorted by position, in one ConfigError.
 */
import { ConfigError, redactUrl } from '../shared/errors.js';

/** One thing wrong with the configuration file. Lines and columns are 1-based. */
export interface ConfigProblem {
  file: string;
  line: number;
  col: number;
  /** Formatted key path (`bridges[0].source.connection`); undefined for problems of the file itself (YAML syntax). */
  key?: string;
  message: string;
}

export function formatProblem(p: ConfigProblem): string {
  return `${p.file}:${p.line}:${p.col}${p.key === undefined ? '' : ` ${p.key}`}: ${p.message}`;
}

export function sortProblems(problems: readonly ConfigProblem[]): ConfigProblem[] {
  const seen = new Set<string>();
  return [...problems]
    .sort((a, b) => a.line - b.line || a.col - b.col || (a.key ?? '').localeCompare(b.key ?? ''))
    .filter((p) => {
      const line = formatProblem(p);
      if (seen.has(line)) return false;
      seen.add(line);
      return true;
    });
}

/**
 * The configuration is invalid. `problems` holds every problem found (sorted by position); the message lists them,
 * one per line, after a summary line.
 */
export class ConfigFileError extends ConfigError {
  readonly file: string;
  readonly problems: readonly ConfigProblem[];
  constructor(file: string, problems: readonly ConfigProblem[]) {
    const sorted = sortProblems(problems);
    const count = sorted.length === 1 ? '1 problem' : `${sorted.length} problems`;
    super(`invalid configuration ${file} (${count}):\n${sorted.map(formatProblem).join('\n')}`);
    this.file = file;
    this.problems = sorted;
  }
}

/** A short rendering of a value for "got …", with credentials stripped from anything URL-like. */
export function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'an empty value';
  if (Array.isArray(value)) return value.length === 0 ? 'an empty list' : 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string') {
    // A value that failed validation may be a URL that does not parse because of its password (a raw '/' in it):
    // everything between '://' and its last '@' goes, whatever it holds.
    const hidden = value.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^\s]*@/i, '$1***@');
    const shown = hidden.length > 80 ? `${hidden.slice(0, 77)}...` : hidden;
    return redactUrl(JSON.stringify(shown));
  }
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  return typeof value === 'function' ? 'a function' : typeof value;
}
