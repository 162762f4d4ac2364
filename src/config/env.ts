/**
 * `${VAR}` and `${VAR:-default}` substitution in string values of the configuration, from the environment.
 * `$${` stands for a literal `${`. `${VAR:-default}` uses the default when VAR is unset or empty (as in the shell);
 * `${VAR}` with VAR unset is an error, never an empty string, so that a forgotten variable cannot silently turn
 * into a wrong URL.
 *
 * Secrets (Docker-secrets convention): when VAR is not set but VAR_FILE is, `${VAR}` is the content of the file VAR_FILE
 * names (one trailing newline trimmed), e.g. `passphrase: ${KEY_PASSPHRASE}` with
 * KEY_PASSPHRASE_FILE=/run/secrets/key-passphrase. Setting both is an error (which one was meant?), and so is a file
 * that cannot be read. A relative VAR_FILE is relative to the working directory, like any path in the environment.
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml, type Document, type Scalar } from 'yaml';
import { forEachStringValue, type KeyPath } from './yaml-tree.js';
import { CONFIG_PROTOCOLS } from './protocols.js';

export type Env = Readonly<Record<string, string | undefined>>;

/** Something wrong in one string: `index` is where the offending `${` starts in it. */
export interface EnvProblem {
  index: number;
  /** The reference as written, e.g. `${AMQP_URL}`. */
  reference: string;
  message: string;
}

export interface Substituted {
  value: string;
  problems: EnvProblem[];
  /** Whether any `${…}` or `$${` was found (the string was not taken literally). */
  changed: boolean;
}

const REFERENCE = /^([A-Za-z_][A-Za-z0-9_]*)(?::-([\s\S]*))?$/;

/**
 * An address template's reference (src/routing/address-template.ts): a namespace and a dot, which no environment
 * variable name has. In the keys that take templates (TEMPLATE_KEYS) these, and `$${`, are left as written for the
 * template; anywhere else they are an invalid reference that says where templates go.
 */
const TEMPLATE_REFERENCE = /^(header|property)\./;

/**
 * The keys of a bridge's target that take address templates, whatever its protocol: the union of the records' template
 * keys (./protocols/: routing-key and queue on AMQP, queue on STOMP, subject, topic, address), in the records' order.
 * The one list: the template checks (./template-checks.ts) read it too.
 */
export const TEMPLATE_KEYS: readonly string[] = [...new Set(CONFIG_PROTOCOLS.flatMap((p) => p.templateKeys))];

export function isTemplateKey(path: KeyPath): boolean {
  return path.length === 4 && path[0] === 'bridges' && path[2] === 'target' && typeof path[3] === 'string' && TEMPLATE_KEYS.includes(path[3]);
}

/** Reads the file of a VAR_FILE variable; throws like fs.readFileSync. */
export type SecretFileReader = (path: string) => string;

const readSecretFile: SecretFileReader = (path) => readFileSync(path, 'utf8');

/** The value VAR_FILE stands for, or a problem; undefined when VAR_FILE is not set (or empty). */
function fromFile(name: string, env: Env, read: SecretFileReader): { value: string } | { problem: string } | undefined {
  const path = env[`${name}_FILE`];
  if (path === undefined || path === '') return undefined;
  if (env[name] !== undefined) {
    return { problem: `both ${name} and ${name}_FILE are set; set only one (${name}_FILE names a file holding the value)` };
  }
  try {
    return { value: read(path).replace(/\r?\n$/, '') };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'it is a directory' : (code ?? 'unreadable');
    return { problem: `${name}_FILE names ${path}, which cannot be read: ${why}` };
  }
}

/** `keepTemplates`: leave `${header.…}`, `${property.…}` and `$${` to the address template (see isTemplateKey). */
export function substituteEnv(text: string, env: Env, read: SecretFileReader = readSecretFile, keepTemplates = false): Substituted {
  let value = '';
  let changed = false;
  const problems: EnvProblem[] = [];
  let i = 0;
  while (i < text.length) {
    if (text.startsWith('$${', i)) {
      value += keepTemplates ? '$${' : '${';
      i += 3;
      changed = true;
      continue;
    }
    if (!text.startsWith('${', i)) {
      value += text[i];
      i += 1;
      continue;
    }
    changed = true;
    const close = text.indexOf('}', i + 2);
    if (close < 0 && keepTemplates) {
      // The template's own check says what is wrong with it (./template-checks.ts).
      value += text.slice(i);
      break;
    }
    if (close < 0) {
      problems.push({
        index: i,
        reference: text.slice(i),
        message: 'unterminated ${ (expected ${NAME} or ${NAME:-default}; write $${ for a literal ${)',
      });
      break;
    }
    const reference = text.slice(i, close + 1);
    const match = REFERENCE.exec(text.slice(i + 2, close));
    const template = TEMPLATE_REFERENCE.test(text.slice(i + 2, close));
    if (template && keepTemplates) {
      value += reference;
    } else if (template) {
      problems.push({
        index: i,
        reference,
        message: `${reference} is an address template, which only a bridge's target.${TEMPLATE_KEYS.slice(0, -1).join(', target.')} and target.${TEMPLATE_KEYS[TEMPLATE_KEYS.length - 1] ?? ''} accept (write $\${ for a literal \${)`,
      });
    } else if (match === null) {
      problems.push({
        index: i,
        reference,
        message: `invalid reference ${reference} (expected \${NAME} or \${NAME:-default}; write $\${ for a literal \${)`,
      });
    } else {
      const name = match[1] ?? '';
      const fallback = match[2];
      const set = env[name];
      const file = fromFile(name, env, read);
      if (file !== undefined && 'problem' in file) {
        problems.push({ index: i, reference, message: file.problem });
      } else if (file !== undefined && (fallback === undefined || file.value !== '')) {
        value += file.value;
      } else if (fallback !== undefined) {
        value += set === undefined || set === '' ? fallback : set;
      } else if (set === undefined) {
        problems.push({
          index: i,
          reference,
          message: `environment variable ${name} is not set and ${reference} has no default (set it, or write \${${name}:-default})`,
        });
      } else {
        value += set;
      }
    }
    i = close + 1;
  }
  return { value, problems, changed };
}

/** Reports one substitution problem in the scalar at `path`; `offset` is its position in the file. */
export type EnvProblemSink = (offset: number, path: KeyPath, message: string) => void;

/**
 * Substitutes in every string value of the document, in place. A plain (unquoted) scalar is re-typed after
 * substitution, as YAML would have typed the text had it been written there (`prefetch: ${PREFETCH:-500}` is the
 * number 500); a quoted scalar stays a string.
 */
export function substituteEnvInDocument(doc: Document, source: string, env: Env, report: EnvProblemSink): void {
  forEachStringValue(doc, (node: Scalar<string>, path) => {
    const result = substituteEnv(node.value, env, readSecretFile, isTemplateKey(path));
    if (!result.changed) return;
    const start = node.range?.[0] ?? 0;
    const end = node.range?.[1] ?? start;
    for (const problem of result.problems) {
      // Point at the reference itself when it appears verbatim in the source (it does unless escapes split it).
      const found = source.slice(start, end).indexOf(problem.reference);
      report(found >= 0 ? start + found : start, path, problem.message);
    }
    node.value = result.value;
    if (node.type === 'PLAIN') {
      const retyped = plainScalarValue(result.value);
      if (retyped !== undefined) (node as Scalar<unknown>).value = retyped;
    }
  });
}

function plainScalarValue(text: string): number | boolean | undefined {
  try {
    const v: unknown = parseYaml(text);
    return typeof v === 'number' || typeof v === 'boolean' ? v : undefined;
  } catch {
    return undefined;
  }
}
