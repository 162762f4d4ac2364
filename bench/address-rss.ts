/**
 * The bridge process's memory when every message names a new target address (issue 33, item 4): N messages (default
 * 100,000), each with its own `region` header, forwarded by the real `broker-bridge run` through a templated routing key
 * `r.${header.region}` on one topic exchange bound to one queue with `#` (so no queue per address is needed), with
 * max-addresses 10,000 and a short address-idle-timeout (default 5 s, so that the addresses are forgotten while the run
 * goes and every message is forwarded). It prints the bridge's resident set (VmRSS) and V8 heap in use (its own
 * /metrics) at every tenth of the run, with what the target queue holds by then, and the peak RSS (VmHWM) at the end.
 *
 *   redis-server --port 6391 --save '' --appendonly no --daemonize yes     # a Redis of its own: 100,000 addresses
 *   REDIS_URL=redis://127.0.0.1:6391 node --import tsx bench/address-rss.ts [--messages 100000] [--idle 5000]
 *   redis-cli -p 6391 shutdown nosave
 *
 * With --old, the configuration leaves out max-addresses and address-idle-timeout, for a build before them (set
 * BRIDGE_CLI to its dist/cli.js). It needs AMQP_URL (default the local RabbitMQ) and removes its queues, exchange and
 * Redis keys at the end.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import amqp from 'amqplib';
import { Redis } from 'ioredis';
import { BridgeProcess, writeConfig } from '../test/support/bridge-process.js';

const { values } = parseArgs({ options: { messages: { type: 'string', default: '100000' }, idle: { type: 'string', default: '5000' }, old: { type: 'boolean', default: false } } });
const N = Number(values.messages);
const amqpUrl = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6391';
const run = `bbrss-${process.pid}`;
const [source, target, dlq, exchange] = [`${run}-in`, `${run}-out`, `${run}-dlq`, `${run}-x`];

function status(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? 0) / 1024;
}

const conn = await amqp.connect(amqpUrl);
const ch = await conn.createConfirmChannel();
await ch.assertExchange(exchange, 'topic', { durable: false, autoDelete: false });
for (const q of [source, target, dlq]) await ch.assertQueue(q, { durable: true });
await ch.bindQueue(target, exchange, '#');
for (let i = 0; i < N; i += 1000) {
  for (let j = i; j < Math.min(N, i + 1000); j++) ch.sendToQueue(source, Buffer.from(`m${j}`), { persistent: true, headers: { region: `a${j}`, _AMQ_DUPL_ID: `id-${j}` } });
  await ch.waitForConfirms();
}
console.log(`${N} messages in ${source}, one address each`);

const yaml = [
  'log-level: info',
  'http-port: 0',
  'connections:',
  `  rabbit: { type: amqp, url: "${amqpUrl}" }`,
  'id-cache:',
  `  redis-url: "${redisUrl}"`,
  `  key-prefix: "${run}"`,
  'bridges:',
  '  - name: rss',
  `    source: { connection: rabbit, queue: "${source}" }`,
  `    target: { connection: rabbit, exchange: "${exchange}", routing-key: "r.\${header.region}" }`,
  `    dead-letter: { connection: rabbit, queue: "${dlq}" }`,
  ...(values.old ? [] : ['    max-addresses: 10000', `    address-idle-timeout: ${values.idle}`]),
  '',
].join('\n');
const started = Date.now();
const bridge = BridgeProcess.start(writeConfig(yaml));
const pid = bridge.child.pid!;
const count = async (q: string) => (await ch.checkQueue(q)).messageCount;
await bridge.waitForLog((l) => l.msg.startsWith('HTTP API on'), 30_000);
const api = `http://127.0.0.1:${bridge.logs.find((l) => l.msg.startsWith('HTTP API on'))!.port as number}`;
/** V8's heap in use, from the bridge's own /metrics (prom-client's nodejs_heap_size_used_bytes). */
const heapMiB = async (): Promise<number> => {
  const text = await (await fetch(`${api}/metrics`)).text();
  return Number(/^nodejs_heap_size_used_bytes (\S+)$/m.exec(text)?.[1] ?? NaN) / 1048576;
};
let next = N / 10;
console.log('| forwarded (+ dead-lettered) | bridge RSS | V8 heap used | seconds |');
console.log('| ---: | ---: | ---: | ---: |');
for (;;) {
  await new Promise((r) => setTimeout(r, 1000));
  const [done, dead] = [await count(target), await count(dlq)];
  if (done + dead >= next || done + dead >= N) {
    console.log(`| ${done} (+ ${dead}) | ${status(pid, 'VmRSS').toFixed(0)} MiB | ${(await heapMiB()).toFixed(0)} MiB | ${((Date.now() - started) / 1000).toFixed(0)} |`);
    next += N / 10;
  }
  if (done + dead >= N) break;
  if (bridge.child.exitCode !== null) throw new Error(`the bridge exited: ${bridge.stderr.join('')}`);
}
console.log(`peak RSS (VmHWM) ${status(pid, 'VmHWM').toFixed(0)} MiB; dead-lettered too-many-addresses: ${await count(dlq)}`);
await bridge.stop();
for (const q of [source, target, dlq]) await ch.deleteQueue(q);
await ch.deleteExchange(exchange);
await conn.close();
const redis = new Redis(redisUrl);
let cursor = '0';
do {
  const [c, keys] = await redis.scan(cursor, 'MATCH', `${run}:*`, 'COUNT', 5000);
  cursor = c;
  if (keys.length > 0) await redis.unlink(...keys);
} while (cursor !== '0');
redis.disconnect();
