/**
 * The configuration's parse among many bridges (issue 47: a reload of one bridge among 1,000 should take < 0.5 s, and
 * reading the file is most of it). Builds the file bench/many-bridges.ts writes, with N bridges, and times loadConfig
 * and warnings() on it, the first call and warm ones, in this process:
 *
 *   node --import tsx bench/config-parse.ts [--bridges 1000] [--rounds 10]
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { loadConfig, warnings } from '../src/config/load.js';

const { values } = parseArgs({ options: { bridges: { type: 'string', default: '1000' }, rounds: { type: 'string', default: '10' } } });
const N = Number(values.bridges);
const rounds = Number(values.rounds);

const lines = [
  'log-level: info',
  'http-port: 0',
  'connections:',
  '  rabbit: { type: amqp, url: "amqp://guest:guest@127.0.0.1:5672/bench" }',
  'id-cache:',
  '  redis-url: "redis://127.0.0.1:6379"',
  'defaults:',
  '  prefetch: 50',
  'bridges:',
];
for (let i = 0; i < N; i++) lines.push(`  - name: b${i}`, `    source: { connection: rabbit, queue: "src-${i}" }`, '    target: { connection: rabbit, queue: "tgt" }');
const dir = mkdtempSync(join(tmpdir(), 'bb-config-parse-'));
const file = join(dir, 'bridges.yaml');
const text = lines.join('\n') + '\n';
writeFileSync(file, text);

function timed<T>(fn: () => T): [T, number] {
  const t0 = performance.now();
  const v = fn();
  return [v, performance.now() - t0];
}

try {
  const load: number[] = [];
  const warn: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const [config, ms] = timed(() => loadConfig(file, {}));
    load.push(ms);
    warn.push(timed(() => warnings(config))[1]);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const f = (x: number) => x.toFixed(0);
  console.log(`config-parse: ${N} bridges, ${(text.length / 1024).toFixed(0)} KiB, ${rounds} rounds`);
  console.log(`  loadConfig: first ${f(load[0]!)} ms, warm median ${f(median(load.slice(1)))} ms (min ${f(Math.min(...load.slice(1)))})`);
  console.log(`  warnings:   first ${f(warn[0]!)} ms, warm median ${f(median(warn.slice(1)))} ms`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
