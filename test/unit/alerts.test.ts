/**
 * docs/alerts.yaml, the documented alert set (docs/operations.md#alerts): its shape and the metrics it names are
 * checked always (a renamed metric or a typo fails here, against the Metrics the process registers); where Debian's
 * `prometheus` package put promtool on the PATH, `promtool check rules` must accept the file and `promtool test rules`
 * must see the backlog-age, dead-letter and stall alerts fire on made-up series (and not before their time).
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { Metrics } from '../../src/core/metrics.js';

const FILE = resolve(import.meta.dirname, '../../docs/alerts.yaml');
const run = promisify(execFile);

interface Rule {
  alert?: unknown;
  expr?: unknown;
  for?: unknown;
  labels?: Record<string, unknown>;
  annotations?: Record<string, unknown>;
}

function promtool(): string | undefined {
  try {
    execFileSync('promtool', ['--version'], { stdio: 'ignore' });
    return 'promtool';
  } catch {
    return undefined;
  }
}

/** The metric names the process exports (a histogram's series too). */
function exported(): Set<string> {
  const m = new Metrics('test', { defaultMetrics: false });
  const names = new Set<string>();
  for (const metric of m.registry.getMetricsAsArray()) {
    const name = (metric as unknown as { name: string }).name;
    for (const suffix of ['', '_bucket', '_sum', '_count']) names.add(name + suffix);
  }
  return names;
}

describe('docs/alerts.yaml', () => {
  const doc = parse(readFileSync(FILE, 'utf8')) as { groups?: { name?: unknown; rules?: Rule[] }[] };
  const rules = (doc.groups ?? []).flatMap((g) => g.rules ?? []);

  it('is a rule file of alerts, each with an expression over metrics the process exports, a severity and a summary', () => {
    expect(doc.groups?.length).toBeGreaterThan(0);
    for (const g of doc.groups ?? []) expect(typeof g.name).toBe('string');
    const names = exported();
    const alerts = rules.map((r) => r.alert);
    // The set issue 44 asks for: stalled, backlog age, dead letters, cache horizon short, flagging after a cache loss.
    expect(alerts).toEqual(expect.arrayContaining(['BridgeStalled', 'BridgeBacklogOld', 'BridgeDeadLetters', 'BridgeCacheHorizonShort', 'BridgeFlaggingAfterCacheLoss']));
    for (const r of rules) {
      expect(r.alert, JSON.stringify(r)).toMatch(/^[A-Z][A-Za-z]+$/);
      expect(typeof r.expr).toBe('string');
      if (r.for !== undefined) expect(r.for).toMatch(/^\d+[smh]$/);
      expect(['page', 'ticket']).toContain(r.labels?.severity);
      expect(typeof r.annotations?.summary).toBe('string');
      const used = String(r.expr).match(/\bbridge_[a-z_]+/g) ?? [];
      expect(used.length, `${String(r.alert)} names no bridge_ metric`).toBeGreaterThan(0);
      for (const metric of used) expect(names.has(metric), `${String(r.alert)}: ${metric} is not a metric the process exports`).toBe(true);
    }
  });

  it('is documented in docs/operations.md', () => {
    const ops = readFileSync(resolve(import.meta.dirname, '../../docs/operations.md'), 'utf8');
    for (const r of rules) expect(ops).toContain(String(r.alert));
  });

  it('promtool check rules accepts it', async (ctx) => {
    const tool = promtool();
    if (tool === undefined) ctx.skip("promtool is not installed (Debian's prometheus package: apt-get install -y --no-install-recommends prometheus)");
    const { stdout } = await run(tool!, ['check', 'rules', FILE]);
    expect(stdout).toContain(`SUCCESS: ${rules.length} rules found`);
  });

  it('promtool test rules: the backlog-age, dead-letter and stall alerts fire on made-up series, and not before their time', async (ctx) => {
    const tool = promtool();
    if (tool === undefined) ctx.skip("promtool is not installed (Debian's prometheus package: apt-get install -y --no-install-recommends prometheus)");
    const dir = mkdtempSync(join(tmpdir(), 'alerts-'));
    const tests = join(dir, 'alerts-test.yaml');
    // The age grows 60 s a minute from 0 (a target gone at t0); over 300 s from 6m, and `for: 2m` makes it fire at 8m.
    writeFileSync(
      tests,
      [
        `rule_files: [${JSON.stringify(FILE)}]`,
        'evaluation_interval: 1m',
        'tests:',
        '  - interval: 1m',
        '    input_series:',
        "      - series: 'bridge_oldest_unforwarded_age_seconds{bridge=\"orders\"}'",
        "        values: '0+60x15'",
        "      - series: 'bridge_messages_dead_lettered_total{bridge=\"orders\",reason=\"too-large\"}'",
        "        values: '0 0 0 1 1 1 1 1 1 1 1 1 1 1 1 1'",
        "      - series: 'bridge_stalls_total{bridge=\"orders\"}'",
        "        values: '0 0 0 0 0 1 1 1 1 1 1 1 1 1 1 1'",
        '    alert_rule_test:',
        '      - { eval_time: 7m, alertname: BridgeBacklogOld, exp_alerts: [] }',
        '      - eval_time: 8m',
        '        alertname: BridgeBacklogOld',
        '        exp_alerts:',
        '          - exp_labels: { bridge: orders, severity: page }',
        '            exp_annotations:',
        '              summary: "bridge orders: oldest unforwarded message is 8m 0s old"',
        '              description: "Bridge orders holds a message it has not forwarded for over 5 minutes (state in bridge_state; target-full, reconnecting or blocked usually)."',
        '      - { eval_time: 2m, alertname: BridgeDeadLetters, exp_alerts: [] }',
        '      - eval_time: 4m',
        '        alertname: BridgeDeadLetters',
        '        exp_alerts:',
        '          - exp_labels: { bridge: orders, reason: too-large, severity: ticket }',
        '            exp_annotations:',
        '              summary: "bridge orders dead-lettered messages (too-large)"',
        '              description: "Bridge orders moved 1 message(s) to its dead-letter destination in 10 minutes, reason too-large."',
        '      - { eval_time: 4m, alertname: BridgeStalled, exp_alerts: [] }',
        '      - eval_time: 6m',
        '        alertname: BridgeStalled',
        '        exp_alerts:',
        '          - exp_labels: { bridge: orders, severity: page }',
        '            exp_annotations:',
        '              summary: "bridge orders stalled"',
        '              description: "The stall watchdog of bridge orders fired 1 time(s) in 10 minutes: it had work and forwarded nothing for stall-timeout. See lastError in GET /bridges/orders."',
        '',
      ].join('\n'),
    );
    const out = await run(tool!, ['test', 'rules', tests]).catch((err: { stdout?: string; stderr?: string }) => {
      throw new Error(`promtool test rules failed:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
    });
    expect(out.stdout).toContain('SUCCESS');
  });
});
