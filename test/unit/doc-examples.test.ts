/**
 * Every bridge configuration the documentation shows passes `broker-bridge validate`: each ```yaml block of README.md
 * and docs/*.md with a top-level `bridges:` key (written to a temporary file first), every examples/*.yaml file and
 * the repository's bridges.yaml (validated where they are). `main()` of src/cli.ts runs in-process with an
 * environment of its own, so that the examples' `${VAR:-default}` defaults are what is checked, not this machine's
 * AMQP_URL and the like. A whole file must also validate without a warning: it is there to be copied.
 *
 * The TLS example names its certificates and password files under ${BRIDGE_TLS_DIR} and ${BRIDGE_SECRETS_DIR}, and the
 * loader reads and checks them (PEM, the key against its passphrase and certificate): the test makes real ones with
 * openssl (test/support/tls-fixtures.ts), and skips only what needs them when openssl is missing.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { main, type CliIo } from '../../src/cli.js';
import { makeTlsFiles, type TlsFiles } from '../support/tls-fixtures.js';

const root = resolve(import.meta.dirname, '../..');

/** A YAML text to check: a fenced block of a markdown page, or a whole file. */
interface YamlBlock {
  /** Where it is, as a failure names it: `README.md:62` (the line of the opening fence) or `examples/tls.yaml`. */
  where: string;
  source: string;
  /** Line of the source the text's first line is on. */
  firstLine: number;
  text: string;
  /** The file itself, for whole files (validated in place, so that relative paths resolve as they would). */
  file?: string;
}

/** The ```yaml (or ```yml) fenced blocks of a markdown file. */
function yamlBlocksOf(source: string): YamlBlock[] {
  const lines = readFileSync(resolve(root, source), 'utf8').split('\n');
  const blocks: YamlBlock[] = [];
  let open: { fence: string; yaml: boolean; line: number; body: string[] } | undefined;
  lines.forEach((line, i) => {
    const m = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)/.exec(line);
    if (open === undefined) {
      if (m !== null) open = { fence: m[2] ?? '```', yaml: /^ya?ml$/i.test(m[3] ?? ''), line: i + 1, body: [] };
      return;
    }
    if (m !== null && line.trim() === m[2] && (m[2] ?? '').startsWith(open.fence[0] ?? '`') && (m[2] ?? '').length >= open.fence.length) {
      if (open.yaml) blocks.push({ where: `${source}:${open.line}`, source, firstLine: open.line + 1, text: open.body.join('\n') + '\n' });
      open = undefined;
      return;
    }
    open.body.push(line);
  });
  return blocks;
}

const markdown = ['README.md', ...readdirSync(resolve(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
const exampleFiles = readdirSync(resolve(root, 'examples')).filter((f) => /\.ya?ml$/.test(f)).sort().map((f) => `examples/${f}`);
const wholeFiles = ['bridges.yaml', ...exampleFiles];

const blocks: YamlBlock[] = [
  ...markdown.flatMap(yamlBlocksOf),
  ...wholeFiles.map((source) => ({ where: source, source, firstLine: 1, text: readFileSync(resolve(root, source), 'utf8'), file: resolve(root, source) })),
];

function parsed(block: YamlBlock): { value?: unknown; error?: string } {
  try {
    return { value: parseYaml(block.text) as unknown };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

function isBridgeConfig(block: YamlBlock): boolean {
  const { value } = parsed(block);
  return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.hasOwn(value, 'bridges');
}

const configs = blocks.filter(isBridgeConfig);
/** Blocks that name the TLS and secret files only this test can provide. */
const needsTlsFiles = (b: YamlBlock) => /\$\{BRIDGE_(TLS|SECRETS)_DIR\b/.test(b.text);
const hasOpenssl = spawnSync('openssl', ['version'], { stdio: 'ignore' }).status === 0;

const work = mkdtempSync(join(tmpdir(), 'bb-doc-examples-'));
let tls: TlsFiles | undefined;
/** The whole environment the examples see: only the variables this test provides. */
const env: Record<string, string> = {};

beforeAll(() => {
  const secrets = join(work, 'secrets');
  mkdirSync(secrets);
  for (const name of ['rabbit-password', 'activemq-password', 'redis-password']) writeFileSync(join(secrets, name), 'not-a-real-password\n');
  env.BRIDGE_SECRETS_DIR = secrets;
  if (hasOpenssl) {
    tls = makeTlsFiles();
    env.BRIDGE_TLS_DIR = tls.dir;
    env.CLIENT_KEY_PASSPHRASE = tls.clientPassphrase;
  }
});

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
  if (tls !== undefined) rmSync(tls.dir, { recursive: true, force: true });
});

/** Runs `broker-bridge validate` in-process; stderr's locations in a temporary file are turned into the source's lines. */
async function validate(block: YamlBlock): Promise<{ code: number; stdout: string; stderr: string }> {
  let file = block.file;
  if (file === undefined) {
    file = join(work, `${block.where.replace(/[^A-Za-z0-9.-]+/g, '_')}.yaml`);
    writeFileSync(file, block.text);
  }
  let stdout = '';
  let stderr = '';
  const io: CliIo = { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t), env };
  const code = await main(['validate', '--config', file], io);
  const located = new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?::(\\d+)(?::(\\d+))?)?`, 'g');
  const mapped = (text: string) =>
    text.replace(located, (_m, line?: string, col?: string) =>
      line === undefined ? block.source : `${block.source}:${block.firstLine + Number(line) - 1}${col === undefined ? '' : `:${col}`}`,
    );
  return { code, stdout: mapped(stdout), stderr: mapped(stderr) };
}

describe('configurations in the documentation and in examples/', () => {
  it('finds them: the README block, bridges.yaml and one example per deployment', () => {
    expect(exampleFiles).toEqual(
      expect.arrayContaining(['examples/rabbitmq-stomp-peer.yaml', 'examples/redis-cluster.yaml', 'examples/redis-sentinel.yaml', 'examples/tls.yaml', 'examples/two-replicas.yaml']),
    );
    expect(configs.filter((b) => b.file === undefined).map((b) => b.source)).toContain('README.md');
    expect(configs.length, configs.map((b) => b.where).join(', ')).toBeGreaterThanOrEqual(7);
  });

  it.each(blocks.map((b) => [b.where, b] as const))('%s parses as YAML', (_where, block) => {
    expect(parsed(block).error, `${block.where}: not valid YAML`).toBeUndefined();
  });

  it.for(configs.map((b) => [b.where, b] as const))('%s passes broker-bridge validate', async ([where, block], { skip }) => {
    // openssl makes the certificates the TLS example names; without it that example cannot be loaded.
    if (needsTlsFiles(block) && !hasOpenssl) skip(`${where}: openssl is missing`);
    const r = await validate(block);
    expect(r.code, `${where}: broker-bridge validate exited ${r.code}:\n${r.stderr}`).toBe(0);
    if (block.file !== undefined) {
      // A whole example is meant to be copied: it should not need a warning either.
      expect(r.stderr, `${where}: broker-bridge validate warned:\n${r.stderr}`).toBe('');
    }
  });
});
