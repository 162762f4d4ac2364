/**
 * Checks of the address templates in a bridge's target (`routing-key`, `queue` or `topic`, see
 * ../routing/address-template.ts): a bad template is a located problem at the offending `${` itself, saying its
 * column inside the template. Like ./cross-checks.ts they run on the plain data (after `${VAR}` substitution, which
 * leaves template references alone in these keys: ./env.ts isTemplateKey).
 */
import { parseAddressTemplate } from '../routing/address-template.js';
import type { ProblemCollector } from './problems.js';
import { asRecord } from './raw-data.js';

export function checkTemplates(rawInput: unknown, source: string, out: ProblemCollector): void {
  const raw = asRecord(rawInput);
  if (raw === undefined || !Array.isArray(raw.bridges)) return;
  raw.bridges.forEach((value: unknown, i) => {
    const target = asRecord(asRecord(value)?.target);
    if (target === undefined) return;
    for (const key of ['routing-key', 'queue', 'topic']) {
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
