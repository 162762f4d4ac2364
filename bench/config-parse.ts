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
import { pathToFileURL } from 'node:url';
import * as here from '../src/config/load.js';

const { values } = parseArgs({
  options: { bridges: { type: 'string', default: '1000' }, rounds: { type: 'string', default: '10' }, compare: { type: 'string' } },
});
type Loader = Pick<typeof here, 'loadConfig' | 'warnings'>;
const builds: [string, Loader][] = [['this build', here]];
if (values.compare !== undefined) {
  const other = (await import(pathToFileURL(join(values.compare, 'src/config/load.ts')).href)) as Loader;
  builds.unshift([values.compare, other]);
}
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
const head = lines.length;
for (let i = 0; i < N; i++) lines.push(`  - name: b${i}`, `    source: { connection: rabbit, queue: "src-${i}" }`, '    target: { connection: rabbit, queue: "tgt" }');
const dir = mkdtempSync(join(tmpdir(), 'bb-config-parse-'));
const file = join(dir, 'bridges.yaml');
const text = lines.join('\n') + '\n';
/** The file with bridge `i`'s source queue renamed (round `r`). */
function withOneChanged(i: number, r: number): string {
  const changed = [...lines];
  changed[head + 3 * i + 1] = `    source: { connection: rabbit, queue: "src-${i}-r${r}" }`;
  return changed.join('\n') + '\n';
}

function timed<T>(fn: () => T): [T, number] {
  const t0 = performance.now();
  const v = fn();
  return [v, performance.now() - t0];
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const f = (x: number) => x.toFixed(0);
const results = builds.map(() => ({ first: 0, same: [] as number[], one: [] as number[], warn: [] as number[] }));
try {
  writeFileSync(file, text);
  for (const [b, [, build]] of builds.entries()) {
    const [config, ms] = timed(() => build.loadConfig(file, {}));
    results[b]!.first = ms;
    results[b]!.warn.push(timed(() => build.warnings(config))[1]);
  }
  for (let r = 0; r < rounds; r++) {
    for (const [b, [, build]] of builds.entries()) {
      writeFileSync(file, text);
      build.loadConfig(file, {});
      results[b]!.same.push(timed(() => build.loadConfig(file, {}))[1]);
      writeFileSync(file, withOneChanged((r * 7919) % N, r));
      const [config, ms] = timed(() => build.loadConfig(file, {}));
      if (!config.bridges.some((x) => JSON.stringify(x).includes(`-r${r}"`))) throw new Error('the changed bridge was not read');
      results[b]!.one.push(ms);
      results[b]!.warn.push(timed(() => build.warnings(config))[1]);
    }
  }
  console.log(`config-parse: ${N} bridges, ${(text.length / 1024).toFixed(0)} KiB, ${rounds} rounds`);
  for (const [b, [name]] of builds.entries()) {
    const x = results[b]!;
    console.log(`  ${name}`);
    console.log(`    loadConfig, first: ${f(x.first)} ms`);
    console.log(`    loadConfig, the same file again: median ${f(median(x.same))} ms (min ${f(Math.min(...x.same))}, max ${f(Math.max(...x.same))})`);
    console.log(`    loadConfig, one bridge changed:  median ${f(median(x.one))} ms (min ${f(Math.min(...x.one))}, max ${f(Math.max(...x.one))})`);
    console.log(`    warnings: first ${f(x.warn[0]!)} ms, then median ${f(median(x.warn.slice(1)))} ms`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
