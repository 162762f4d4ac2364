/**
 * Checks of the address templates in a bridge's target (`routing-key`, `queue`, `subject`, `topic` or `address`, see
 * ../routing/address-template.ts): a bad template is a located problem at the offending `${` itself, saying its
 * column inside the template. Like ./cross-checks.ts they run on the plain data (after `${VAR}` substitution, which
 * leaves template references alone in these keys: ./env.ts isTemplateKey).
 */
import { isTemplated, parseAddressTemplate } from '../routing/address-template.js';
import { DEFAULT_TEMPLATE_VALUES, compileValuePattern, refusedCharacters, showCharacter } from '../routing/address-values.js';
import type { ProblemCollector } from './problems.js';
import { TEMPLATE_KEYS } from './env.js';
import { asRecord, asString } from './raw-data.js';
import { findConfigProtocol } from './protocols.js';

export function checkTemplates(rawInput: unknown, source: string, out: ProblemCollector): void {
  const raw = asRecord(rawInput);
  if (raw === undefined || !Array.isArray(raw.bridges)) return;
  checkTemplateValues(raw, out);
  raw.bridges.forEach((value: unknown, i) => {
    const target = asRecord(asRecord(value)?.target);
    if (target === undefined) return;
    for (const key of TEMPLATE_KEYS) {
      const text = target[key];
      if (typeof text !== 'string') continue;
      const parsed = parseAddressTemplate(text);
      if (!('error' in parsed)) continue;
      const { index, message } = parsed.error;
      const path = ['bridges', i, 'target', key];
      const start = out.offsetOfValue(path);
      // The `${` as written in the file (it is, unless `${VAR}` substitution changed what comes before it).
      const close = text.indexOf('}', index);
      const fragment = text.slice(index, close < 0 ? text.length : close + 1);
      const found = start === undefined ? -1 : source.indexOf(fragment, start);
      const sentence = `bad address template at column ${index + 1} of '${text}': ${message}`;
      if (start !== undefined && found >= 0) out.atOffset(found, path, sentence);
      else out.atValue(path, sentence);
    }
  });
}

/**
 * `template-values` (in a bridge, or in `defaults:`): a regular expression that compiles, tried on one character at a
 * time; for a bridge whose target is templated, it must not admit a separator of the target's protocol, a control or a
 * white-space character (../routing/address-values.ts). Located at the key that set it, naming the bridge when the
 * pattern came from `defaults:`.
 */
function checkTemplateValues(raw: Record<string, unknown>, out: ProblemCollector): void {
  const defaults = asString(asRecord(raw.defaults)?.['template-values']);
  const defaultsPath = ['defaults', 'template-values'];
  if (defaults !== undefined) {
    const compiled = compileValuePattern(defaults);
    if (!compiled.ok) out.atValue(defaultsPath, invalidPattern(defaults, compiled.error));
  }
  const connections = asRecord(raw.connections);
  (raw.bridges as unknown[]).forEach((value: unknown, i) => {
    const bridge = asRecord(value);
    const own = asString(bridge?.['template-values']);
    const path = own !== undefined ? ['bridges', i, 'template-values'] : defaultsPath;
    const pattern = own ?? defaults ?? DEFAULT_TEMPLATE_VALUES;
    const compiled = compileValuePattern(pattern);
    if (!compiled.ok) {
      if (own !== undefined) out.atValue(path, invalidPattern(pattern, compiled.error));
      return;
    }
    const target = asRecord(bridge?.target);
    const protocol = findConfigProtocol(asRecord(connections?.[asString(target?.connection) ?? ''])?.type);
    if (target === undefined || protocol === undefined || !hasTemplate(target)) return;
    const admitted = refusedCharacters(protocol.addressSyntax).filter((c) => compiled.regex.test(c));
    if (admitted.length === 0) return;
    const name = asString(bridge?.name) ?? `#${i + 1}`;
    const whose = own !== undefined ? '' : ` (for bridge '${name}')`;
    out.atValue(
      path,
      `template-values ${pattern} admits ${admitted.slice(0, 5).map(showCharacter).join(', ')}${admitted.length > 5 ? ` and ${admitted.length - 5} more` : ''}${whose}: a value with it could steer a message on this ${protocol.type.toUpperCase()} target elsewhere; expected a pattern that admits none of ${[...protocol.addressSyntax.chars].join(' ')} and no control or white-space character, e.g. the default ${DEFAULT_TEMPLATE_VALUES}`,
    );
  });
}

function invalidPattern(pattern: string, error: string): string {
  return `template-values '${pattern}' is not a valid regular expression (${error}); expected one that a single character of a template value must match, e.g. ${DEFAULT_TEMPLATE_VALUES}`;
}

/** A template key of the target (TEMPLATE_KEYS) has a template reference. */
function hasTemplate(target: Record<string, unknown>): boolean {
  return TEMPLATE_KEYS.some((key) => {
    const text = asString(target[key]);
    if (text === undefined) return false;
    const parsed = parseAddressTemplate(text);
    return !('error' in parsed) && isTemplated(parsed.template);
  });
}
