/**
 * Issue 42's first row, as one scenario that a test asserts on and bench/blast-radius-amqp.ts prints: two bridges A and
 * B of one `broker-bridge run` on one configured AMQP connection (so on one consuming and one publishing connection:
 * src/endpoints/connections.ts); one message whose headers nest a table thousands of levels deep published to A's
 * source, then ordinary messages to both sources; what each bridge forwarded within a deadline, what A dead-lettered,
 * how often each bridge (re)started its session, and what the log said.
 *
 * The deep message is published from a child `node --stack-size=50000`: amqplib's encoder recurses too, and a table
 * ~3,000 deep overflows the default stack (RabbitMQ accepts and delivers 8,000).
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { deleteKeysUnder } from './redis-keys.js';
import { AmqpTestClient, type ReceivedMessage } from './amqp.js';
import { BridgeProcess, writeConfig } from './bridge-process.js';
import { bridgeConfig } from './configs.js';
import { parsePrometheusText } from './prometheus-text.js';
import { services, uniqueName } from './services.js';
import { sleep } from './wait.js';

const ROOT = resolve(import.meta.dirname, '../..');

/** The deep message's own properties, which the dead-letter copy must keep. */
export const DEEP_PROPERTIES = { messageId: 'deep-1', correlationId: 'corr-deep', contentType: 'text/plain', type: 'deep-table', appId: 'hostile-publisher', priority: 3 } as const;
export const DEEP_BODY = 'the body of the message with the deep table';

const PUBLISHER = `
import amqp from 'amqplib';
const [url, queue, depth, body, props] = process.argv.slice(1);
let table = { leaf: 'bottom' };
for (let i = 1; i < Number(depth); i++) table = { n: table };
const conn = await amqp.connect(url);
const ch = await conn.createConfirmChannel();
ch.sendToQueue(queue, Buffer.from(body), { ...JSON.parse(props), persistent: true, headers: { deep: table, plain: 'kept?' } });
await ch.waitForConfirms();
await conn.close();
`;

/** Publishes the one message with a header table nested `depth` deep to `queue`, from a child with a large stack. */
export async function publishDeepHeaders(queue: string, depth: number, url = services.amqpUrl): Promise<void> {
  const child = spawn(process.execPath, ['--stack-size=50000', '--input-type=module', '-e', PUBLISHER, url, queue, String(depth), DEEP_BODY, JSON.stringify(DEEP_PROPERTIES)], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  if (code !== 0) throw new Error(`the deep-table publisher exited ${code}: ${stderr.slice(-2000)}`);
}

export interface FirstRow {
  /** Distinct ordinary messages in each bridge's target when the deadline passed or all had come. */
  aForwarded: number;
  bForwarded: number;
  /** Everything in A's dead-letter queue. */
  deadLettered: ReceivedMessage[];
  /** bridge_sessions_started_total of each bridge once both ran, and at the end. */
  sessions: { a: [number, number]; b: [number, number] };
  /** Log lines at warn or above, by message, with how often each came. */
  warnings: Map<string, number>;
  /** Milliseconds from the first ordinary publish until each target held all its messages (undefined: not by the deadline). */
  doneMs: { a?: number; b?: number };
  /** Messages left in A's source queue at the end (the deep one, redelivered, when it was never settled). */
  leftInSourceA: number;
}

async function sessionsStarted(base: string): Promise<{ a: number; b: number }> {
  const m = parsePrometheusText(await (await fetch(`${base}/metrics`)).text());
  const of = (bridge: string) => m.find('bridge_sessions_started_total', { bridge }).reduce((s, x) => s + x.value, 0);
  return { a: of('a'), b: of('b') };
}

/** Runs the row: `depth` levels, `perSource` ordinary messages to each source, `deadlineMs` to forward them. */
export async function runFirstRow(opts: { depth?: number; perSource?: number; deadlineMs?: number } = {}): Promise<FirstRow> {
  const { depth = 8000, perSource = 500, deadlineMs = 40_000 } = opts;
  const client = await AmqpTestClient.connect();
  const [srcA, outA, dlA, srcB, outB] = ['bra-sa', 'bra-oa', 'bra-dla', 'bra-sb', 'bra-ob'].map((p) => uniqueName(p));
  const queues = [srcA!, outA!, dlA!, srcB!, outB!];
  for (const q of queues) await client.queue(q);
  const { yaml, keyPrefix } = bridgeConfig({
    bridges: [
      { name: 'a', sourceQueue: srcA!, target: `queue: "${outA!}"`, deadLetter: `connection: rabbit, queue: "${dlA!}"`, extra: { prefetch: 100 } },
      { name: 'b', sourceQueue: srcB!, target: `queue: "${outB!}"`, extra: { prefetch: 100 } },
    ],
    top: { 'http-port': 0 },
  });
  const bridge = await BridgeProcess.started(writeConfig(yaml), 2);
  try {
    await bridge.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
    const base = `http://127.0.0.1:${bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number}`;
    const before = await sessionsStarted(base);
    await publishDeepHeaders(srcA!, depth);
    const ordinary = (prefix: string) => Array.from({ length: perSource }, (_, i) => ({ body: Buffer.from(`${prefix}-${i}`), options: { headers: { _AMQ_DUPL_ID: `${keyPrefix}-${prefix}-${i}` } } }));
    const started = Date.now();
    await client.publish(srcA!, ordinary('a'));
    await client.publish(srcB!, ordinary('b'));
    const deadline = started + deadlineMs;
    const doneMs: FirstRow['doneMs'] = {};
    while (Date.now() < deadline && (doneMs.a === undefined || doneMs.b === undefined)) {
      if (doneMs.a === undefined && (await client.count(outA!)) >= perSource) doneMs.a = Date.now() - started;
      if (doneMs.b === undefined && (await client.count(outB!)) >= perSource) doneMs.b = Date.now() - started;
      await sleep(100);
    }
    // A little longer for the dead letter (settled before the 500 after it, but let a slow machine finish).
    while (Date.now() < deadline && (await client.count(dlA!)) === 0) await sleep(200);
    const after = await sessionsStarted(base);
    const distinct = (ms: ReceivedMessage[]) => new Set(ms.map((m) => m.body.toString())).size;
    const row: FirstRow = {
      aForwarded: distinct(await client.drain(outA!)),
      bForwarded: distinct(await client.drain(outB!)),
      deadLettered: await client.drain(dlA!),
      sessions: { a: [before.a, after.a], b: [before.b, after.b] },
      warnings: new Map(),
      doneMs,
      leftInSourceA: 0,
    };
    await bridge.kill('SIGKILL');
    row.leftInSourceA = await client.count(srcA!);
    for (const l of bridge.logs.filter((x) => x.level >= 40)) row.warnings.set(l.msg, (row.warnings.get(l.msg) ?? 0) + 1);
    return row;
  } finally {
    await bridge.kill('SIGKILL');
    await client.deleteQueues(...queues);
    await client.close();
    await deleteKeysUnder(services.redisUrl, keyPrefix);
  }
}
