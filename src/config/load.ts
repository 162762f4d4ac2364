/**
 * Loading `bridges.yaml`: read, parse keeping positions, substitute `${VAR}`, validate against the schema, run
 * the cross-field checks, and resolve into a Config. Synchronous: it runs once at start, before anything connects.
 * Every problem found is reported at once, each with file:line:col and key path, in one ConfigFileError.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve as resolvePath } from 'node:path';
import { Document, LineCounter, parseDocument } from 'yaml';
import { ConfigError } from '../shared/errors.js';
import { crossCheck } from './cross-checks.js';
import { checkHeaderRules } from './rule-checks.js';
import { checkTemplates } from './template-checks.js';
import { substituteEnvInDocument, type Env } from './env.js';
import { ConfigFileError, formatProblem, type ConfigProblem } from './errors-format.js';
import { readConfigFiles } from './files.js';
import { reportIssues } from './issues.js';
import { ProblemCollector } from './problems.js';
import { resolveConfig } from './resolve.js';
import { MAX_ALIAS_COUNT, PARSE_OPTIONS, readQuickly } from './quick-read.js';
import { configFileSchema, type ConfigFile } from './schema.js';
import type { Config } from './types.js';

export { warnings } from './warnings.js';
export { ConfigFileError } from './errors-format.js';

/**
 * Reads and validates the configuration file. `file` is used as given in messages and made absolute in
 * Config.file. Throws ConfigError when the file cannot be read, ConfigFileError (a ConfigError) listing every
 * problem when it is invalid.
 */
export function loadConfig(file: string, env: Env = process.env): Config {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'no such file (give another with --config or BRIDGE_CONFIG)'
        : code === 'EISDIR'
          ? 'it is a directory'
          : code === 'EACCES'
            ? 'permission denied'
            : (err as Error).message;
    throw new ConfigError(`cannot read configuration file ${file}: ${why}`, { cause: err });
  }
  return parseConfig(text, file, env);
}

/** Validates configuration text as if read from `file` (which is only used in messages and Config.file). */
export function parseConfig(text: string, file: string, env: Env = process.env): Config {
  // The good path first, without positions (./quick-read.ts); anything it is not sure of, or any problem, and the
  // file is read again as a whole, with positions, so that every problem names its file, line and key.
  const quick = readQuickly(text, env);
  if (quick !== undefined) {
    const checked = check(quick, text, file, new ProblemCollector(file, new Document(), new LineCounter()));
    // metrics-port's deprecation notice is located: the whole file says it.
    if (checked.config !== undefined && checked.data?.['metrics-port'] === undefined) return checked.config;
  }
  return parseLocated(text, file, env);
}

/**
 * The whole file with positions, every problem located: what parseConfig falls back to (exported for the test that
 * holds the two paths together, test/unit/config-quick-read.test.ts).
 */
export function parseLocated(text: string, file: string, env: Env): Config {
  const lineCounter = new LineCounter();
  // merge: true allows `<<: *anchor`, handy for sharing bridge settings; uniqueKeys rejects a key given twice.
  const doc = parseDocument(text, { lineCounter, ...PARSE_OPTIONS });

  if (doc.errors.length > 0) {
    // Past a syntax error the tree is a guess; report only what the parser found.
    const problems: ConfigProblem[] = doc.errors.map((e) => {
      const at = e.linePos?.[0] ?? lineCounter.linePos(e.pos[0]);
      return { file, line: at.line, col: at.col, message: `invalid YAML: ${firstLine(e.message)}` };
    });
    throw new ConfigFileError(file, problems);
  }

  const out = new ProblemCollector(file, doc, lineCounter);
  const envProblems = new ProblemCollector(file, doc, lineCounter);
  substituteEnvInDocument(doc, text, env, (offset, path, message) => envProblems.atOffset(offset, path, message));

  const raw: unknown = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  if (raw === null || raw === undefined) {
    throw new ConfigFileError(file, [
      { file, line: 1, col: 1, message: 'the file is empty; expected a mapping with connections and bridges' },
    ]);
  }
  const { config, problems, data } = check(raw, text, file, out, envProblems.problems);
  if (config === undefined || data === undefined) throw new ConfigFileError(file, problems);
  if (data['metrics-port'] !== undefined) {
    const notice = new ProblemCollector(file, doc, lineCounter);
    notice.atKey(
      ['metrics-port'],
      data['http-port'] !== undefined
        ? 'deprecated and ignored: http-port is set; remove metrics-port'
        : 'deprecated: rename it to http-port (same meaning; the HTTP API also serves /livez, /readyz and /bridges)',
    );
    config.deprecations = notice.problems.map(formatProblem);
  }
  return config;
}

/**
 * The checks of the configuration's data, the same on both paths: the schema, the cross-field checks, the files it
 * names; resolved into a Config when nothing is wrong. `envProblems` are the substitution's, already found.
 */
function check(
  raw: unknown,
  text: string,
  file: string,
  out: ProblemCollector,
  envProblems: readonly ConfigProblem[] = [],
): { config?: Config; problems: ConfigProblem[]; data?: ConfigFile } {
  // A section whose every line is commented out (`id-cache:` alone) reads as null; take it as not given.
  if (typeof raw === 'object' && raw !== null && !Array.isArray(raw)) {
    const top = raw as Record<string, unknown>;
    for (const section of ['id-cache', 'defaults']) if (top[section] === null) delete top[section];
  }

  const parsed = configFileSchema.safeParse(raw, { reportInput: true });
  if (!parsed.success) reportIssues(parsed.error.issues, configFileSchema, raw, out);
  crossCheck(raw, out);
  checkHeaderRules(raw, out);
  checkTemplates(raw, text, out);
  // Files (password-file, tls) only once the shape is right: their paths and the URLs they go with come from it.
  const files = parsed.success ? readConfigFiles(parsed.data, dirname(resolvePath(file)), out) : undefined;

  // A value whose variable is missing was left empty; what the schema says about that empty value is noise.
  const unset = new Set(envProblems.map((p) => p.key));
  const problems = [...envProblems, ...out.problems.filter((p) => !unset.has(p.key))];
  if (problems.length > 0 || !parsed.success || files === undefined) return { problems };
  return { config: resolveConfig(parsed.data, resolvePath(file), files), problems, data: parsed.data };
}

function firstLine(message: string): string {
  return message.split('\n')[0] ?? message;
}
