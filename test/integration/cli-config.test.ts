/**
 * The built CLI (dist/cli.js, from `npm run build`) on good and bad configuration files: exit codes, and the
 * file:line:col + key path of each problem on stderr. `run` with a bad file must stop at the configuration and
 * never try to connect (its brokers point at 127.0.0.1:1, where nothing listens).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
const CLI = resolve(root, 'dist/cli.js');
const fixture = (name: string) => relative(root, resolve(root, 'test/fixtures/config', name));

function cli(args: string[], env: Record<string, string | undefined> = {}, cwd = root) {
  const childEnv: Record<string, string | undefined> = { ...process.env, ...env };
  for (const k of ['BRIDGE_CONFIG', 'BRIDGE_TEST_UNSET_VAR', 'AMQP_URL', 'STOMP_URL', 'REDIS_URL']) {
    if (!(k in env)) delete childEnv[k];
  }
  const started = Date.now();
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd, env: childEnv, encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, ms: Date.now() - started };
}

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build first with \`npm run build\``);
});

describe('broker-bridge validate', () => {
  it('accepts the example bridges.yaml (the default path ./bridges.yaml, from its folder) and prints OK', () => {
    const r = cli(['validate'], {}, root);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('bridges.yaml: OK (3 bridges)\n');
    expect(r.code).toBe(0);
  });

  it('takes the file from BRIDGE_CONFIG, and --config over it', () => {
    const fromEnv = cli(['validate'], { BRIDGE_CONFIG: fixture('valid-minimal.yaml') });
    expect(fromEnv.stdout).toBe(`${fixture('valid-minimal.yaml')}: OK (1 bridge)\n`);
    expect(fromEnv.code).toBe(0);
    const fromFlag = cli(['validate', '--config', fixture('valid-layered.yaml')], {
      BRIDGE_CONFIG: fixture('bad-wrong-type.yaml'),
    });
    expect(fromFlag.stdout).toBe(`${fixture('valid-layered.yaml')}: OK (2 bridges)\n`);
    expect(fromFlag.code).toBe(0);
  });

  it('prints warnings and still exits 0', () => {
    const r = cli(['validate', '-c', fixture('valid-layered.yaml')]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`${fixture('valid-layered.yaml')}: warning: id-cache.persist-id-cache is false`);
    expect(r.stderr).toContain('id-cache.id-cache-size 100 is smaller than what can be in flight');
  });

  const bad: [string, string[]][] = [
    ['bad-unknown-key.yaml', [":7:5 bridges[0].prefech: unknown key (did you mean 'prefetch'?)"]],
    ['bad-unknown-connection.yaml', [":7:19 bridges[0].source.connection: unknown connection 'rabit' (did you mean 'rabbit'?)"]],
    ['bad-wrong-type.yaml', [':7:15 bridges[0].prefetch: expected an integer from 1 to 65535, got "lots"']],
    ['bad-missing-var.yaml', [':4:11 connections.rabbit.url: environment variable BRIDGE_TEST_UNSET_VAR is not set']],
    ['bad-malformed.yaml', [':6:5: invalid YAML: ']],
    ['bad-duplicate-name.yaml', [":7:11 bridges[1].name: duplicate bridge name 'orders'"]],
    ['bad-queue-and-exchange.yaml', [':6:5 bridges[0].target: has both queue and exchange']],
    ['bad-stomp-target.yaml', [':7:49 bridges[0].target.routing-key: not valid on a STOMP target']],
    ['bad-url-scheme.yaml', [':2:30 connections.rabbit.url: expected a URL starting with amqp://', ':3:54 connections.activemq.urls[1]:']],
    ['bad-same-queue.yaml', [':6:44 bridges[0].target.queue: same queue as the source']],
    [
      'bad-header-rules.yaml',
      [
        ":7:31 bridges[0].rename-headers.region: renames onto a name no rule may use: '_AMQ_DUPL_ID' is the duplicate-ID header",
        ":8:22 bridges[0].remove-headers[0]: 'x-bridge-possible-duplicate' is the possible-duplicate flag; no header rule may change or remove it",
      ],
    ],
    [
      'bad-filter.yaml',
      [":7:13 bridges[0].filter: invalid JMS message selector at column 26 of the expression: expected an operator or the end of the selector, but found '100'\n"],
    ],
    [
      'bad-many.yaml',
      [':1:12 log-level:', ':6:27 bridges[0].source.connection:', ':8:15 bridges[0].prefetch:', ':10:5 bridges[1].source.queue:', ':12:5 bridges[1].max-delivery-attemps:'],
    ],
  ];
  it.each(bad)('%s: exit 2, every problem with file:line:col and key on stderr', (name, expected) => {
    const r = cli(['validate', '--config', fixture(name)]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    for (const e of expected) expect(r.stderr).toContain(`${fixture(name)}${e}`);
    expect(r.stderr.split('\n')[0]).toMatch(new RegExp(`^invalid configuration ${fixture(name).replace(/\./g, '\\.')} \\(${expected.length} problems?\\):$`));
  });

  it('check reports a bad filter as an error finding (exit 1) with the same located sentence, and connects nowhere', () => {
    const r = cli(['check', '--config', fixture('bad-filter.yaml')]);
    expect(r.code).toBe(1);
    expect(r.stdout.split('\n')).toEqual([
      `error   config: ${fixture('bad-filter.yaml')}:7:13 bridges[0].filter: invalid JMS message selector at column 26 of the expression: expected an operator or the end of the selector, but found '100'`,
      `${fixture('bad-filter.yaml')}: 1 error, 0 warnings`,
      '',
    ]);
  });

  it('a missing file: exit 2 with a sentence naming it', () => {
    const r = cli(['validate', '--config', 'does-not-exist.yaml']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('cannot read configuration file does-not-exist.yaml: no such file');
  });
});

describe('broker-bridge run', () => {
  it('with a bad configuration exits 2 before connecting to anything', () => {
    const r = cli(['run', '--config', fixture('bad-run-unreachable.yaml')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      `${fixture('bad-run-unreachable.yaml')}:10:15 bridges[0].prefetch: expected an integer from 1 to 65535, got "lots"`,
    );
    expect(r.stderr).toContain('not started');
    // No log line at all (pino writes to stdout): nothing started, nothing tried 127.0.0.1:1.
    expect(r.stdout).toBe('');
    expect(r.stderr).not.toMatch(/ECONNREFUSED|connect|refused/i);
    expect(r.ms).toBeLessThan(10_000);
  });
});

describe('broker-bridge schema, --help, --version, bad usage', () => {
  it('schema prints the committed bridges.schema.json', () => {
    const r = cli(['schema']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(readFileSync(resolve(root, 'bridges.schema.json'), 'utf8'));
  });

  it('--version prints the package version, --help the usage', () => {
    const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as { version: string };
    expect(cli(['--version']).stdout).toBe(`${pkg.version}\n`);
    const help = cli(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: broker-bridge <command>/);
  });

  it('an unknown command or option exits 64 with the usage', () => {
    const cmd = cli(['frobnicate']);
    expect(cmd.code).toBe(64);
    expect(cmd.stderr).toContain("unknown command 'frobnicate'");
    const opt = cli(['validate', '--bogus']);
    expect(opt.code).toBe(64);
    expect(opt.stderr).toContain("Unknown option '--bogus'");
  });
});

describe('broker-bridge run: log lines', () => {
  // A bridge whose broker does not answer (127.0.0.1:1) logs a few lines and keeps retrying; the test stops it.
  function runFor(ms: number, env: Record<string, string>): string {
    const dir = mkdtempSync(join(tmpdir(), 'bb-log-'));
    const file = join(dir, 'bridges.yaml');
    writeFileSync(
      file,
      [
        'connections:',
        '  rabbit: { type: amqp, url: "amqp://guest:guest@127.0.0.1:1" }',
        'id-cache: { persist-id-cache: false }',
        'bridges:',
        '  - { name: b, source: { connection: rabbit, queue: q }, target: { connection: rabbit, queue: r } }',
        '',
      ].join('\n'),
    );
    const r = spawnSync(process.execPath, [CLI, 'run', '--config', file], { cwd: root, env: { ...process.env, ...env }, encoding: 'utf8', timeout: ms, killSignal: 'SIGKILL' });
    return r.stdout;
  }

  it('are JSON when stdout is not a terminal, and for a person with LOG_FORMAT=pretty (pino-pretty), secrets redacted alike', () => {
    const json = runFor(5000, { LOG_FORMAT: '' }).trim().split('\n');
    expect(json.length).toBeGreaterThan(0);
    for (const line of json) expect(() => JSON.parse(line) as unknown).not.toThrow();
    const pretty = runFor(5000, { LOG_FORMAT: 'pretty' });
    expect(pretty).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] WARN: id-cache\.persist-id-cache is false/m);
    expect(pretty.split('\n').filter((l) => l.startsWith('{'))).toEqual([]);
    expect(pretty).not.toContain('guest:guest');
  });
});
