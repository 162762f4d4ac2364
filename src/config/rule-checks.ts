/**
 * Checks of the header rules (`rename-headers`, `remove-headers`, `set-headers`) that need more than one field: no
 * rule may name the bridge's duplicate-ID header (its own `duplicate-id-header`, else the one of `defaults:`, else
 * `_AMQ_DUPL_ID`), the possible-duplicate flag or another protected name (src/routing/header-rules.ts). Like
 * ./cross-checks.ts they run on the plain data, so that one run reports every problem; what cannot be read is the
 * schema's to report.
 */
import { DEFAULT_ID_HEADER, protectedHeaderReason } from '../routing/header-rules.js';
import type { ProblemCollector } from './problems.js';
import { asRecord } from './raw-data.js';

function stringOr(v: unknown, fallback: string): string {
  return typeof v === 'string' && v !== '' ? v : fallback;
}

export function checkHeaderRules(rawInput: unknown, out: ProblemCollector): void {
  const raw = asRecord(rawInput);
  if (raw === undefined || !Array.isArray(raw.bridges)) return;
  const defaultIdHeader = stringOr(asRecord(raw.defaults)?.['duplicate-id-header'], DEFAULT_ID_HEADER);
  raw.bridges.forEach((value: unknown, i) => {
    const bridge = asRecord(value);
    if (bridge === undefined) return;
    const idHeader = stringOr(bridge['duplicate-id-header'], defaultIdHeader);
    const check = (name: unknown, report: (message: string) => void) => {
      if (typeof name !== 'string') return;
      const reason = protectedHeaderReason(name, idHeader);
      if (reason !== undefined) report(reason);
    };
    const path = (key: string, ...rest: PropertyKey[]) => ['bridges', i, key, ...rest];
    for (const [from, to] of Object.entries(asRecord(bridge['rename-headers']) ?? {})) {
      check(from, (m) => out.atKey(path('rename-headers', from), m));
      check(to, (m) => out.atValue(path('rename-headers', from), `renames onto a name no rule may use: ${m}`));
    }
    const remove = bridge['remove-headers'];
    if (Array.isArray(remove)) remove.forEach((name: unknown, j) => check(name, (m) => out.atValue(path('remove-headers', j), m)));
    for (const name of Object.keys(asRecord(bridge['set-headers']) ?? {})) {
      check(name, (m) => out.atKey(path('set-headers', name), m));
    }
  });
}
