/**
 * Backpressure: 100,000 messages wait at the source while the target is stalled (a TCP black hole between the bridge
 * and RabbitMQ). The bridge may hold only what its prefetch lets in, so its resident memory must stay bounded; when
 * the target returns, the flow resumes and every message arrives.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import amqp from 'amqplib';
import { TcpProxy } from '../support/tcp-proxy.js';
import { BridgeControl } from './bridge-control.js';
import { AmqpCollector, AmqpPublisher } from './harness-clients.js';
import type { OwnRedis } from './own-redis.js';
import { HARNESS_CONNECTION_PREFIX, type RabbitAdmin } from './rabbit-admin.js';
import { normalBody, parseBody, type Outgoing } from './stream.js';
import { sleep } from '../support/wait.js';

const MB = 1024 * 1024;

export interface BackpressureOptions {
  amqpUrl: string;
  redis: OwnRedis;
  admin: RabbitAdmin;
  messages: number;
  stallMs: number;
  /** RSS the bridge must stay under, bytes. */
  limitBytes?: number;
  sampleMs?: number;
  log?: (line: string) => void;
}

export interface BackpressureReport {
  messages: number;
  rssBeforeStall: number;
  peakRssDuringStall: number;
  peakRssOverall: number;
  samples: number;
  deliveredBeforeStall: number;
  deliveredDuringStall: number;
  delivered: number;
  resumeSeconds: number;
  limitBytes: number;
  ok: boolean;
  problems: string[];
}

export async function runBackpressure(o: BackpressureOptions): Promise<BackpressureReport> {
  const log = o.log ?? ((l: string) => console.log(`[backpressure] ${l}`));
  const limitBytes = o.limitBytes ?? 300 * MB;
  const sampleMs = o.sampleMs ?? 500;
  const runId = `bp-${Date.now().toString(36)}`;
  const vhost = `faults-${runId}`;
  await o.admin.createVhost(vhost);
  const vu = new URL(o.amqpUrl);
  vu.pathname = '/' + encodeURIComponent(vhost);
  const rabbitUrl = vu.toString();
  const proxy = await TcpProxy.forUrl(o.amqpUrl).start();
  const tu = new URL(proxy.rewrite(o.amqpUrl));
  tu.pathname = '/' + encodeURIComponent(vhost);
  const targetUrl = tu.toString();

  const conn = await amqp.connect(rabbitUrl, { clientProperties: { connection_name: `${HARNESS_CONNECTION_PREFIX} setup` } });
  const ch = await conn.createChannel();
  await ch.assertQueue('src', { durable: true });
  await ch.assertQueue('tgt', { durable: true });
  await conn.close();

  const yaml = [
    'log-level: info',
    'connections:',
    `  rabbit: { type: amqp, url: "${rabbitUrl}" }`,
    `  rabbit-target: { type: amqp, url: "${targetUrl}" }`,
    'id-cache:',
    `  redis-url: "${o.redis.url}"`,
    `  key-prefix: "faults-${runId}"`,
    'bridges:',
    '  - name: faults-backpressure',
    '    source: { connection: rabbit, queue: src }',
    '    target: { connection: rabbit-target, queue: tgt }',
    '    retry-interval: 500',
    '    max-retry-interval: 2000',
    '',
  ].join('\n');
  const dir = mkdtempSync(join(tmpdir(), 'broker-bridge-faults-'));
  const configFile = join(dir, 'bridges.yaml');
  writeFileSync(configFile, yaml);
  const bridge = new BridgeControl(configFile, log);
  const publisher = new AmqpPublisher(rabbitUrl, 'src');
  const target = new AmqpCollector(rabbitUrl, 'tgt');
  const problems: string[] = [];
  let peakStall = 0;
  let peakAll = 0;
  let samples = 0;
  const sample = () => {
    const r = bridge.rss();
    if (r === undefined) return 0;
    samples += 1;
    peakAll = Math.max(peakAll, r);
    return r;
  };
  const delivered = () => {
    const s = new Set<number>();
    for (const m of target.messages) {
      const b = parseBody(m.body);
      if (b && 'seq' in b) s.add(b.seq);
    }
    return s.size;
  };

  try {
    log(`publishing ${o.messages} messages to the source`);
    await publisher.open();
    for (let i = 0; i < o.messages; i += 1000) {
      const batch: Outgoing[] = [];
      for (let s = i; s < Math.min(o.messages, i + 1000); s++) batch.push({ type: 'normal', seq: s, resend: false, body: normalBody(s, runId), id: `${runId}-${s}` });
      await publisher.publish(batch);
    }
    await publisher.close();
    await target.start();
    if (!(await bridge.start())) throw new Error('the bridge did not start');
    // Let the flow establish, then stall the target with the backlog still at the source.
    const flowDeadline = Date.now() + 30_000;
    while (target.messages.length < Math.min(2000, o.messages / 10) && Date.now() < flowDeadline) await sleep(20);
    const deliveredBeforeStall = delivered();
    const rssBeforeStall = sample();
    log(`stalling the target after ${deliveredBeforeStall} delivered; RSS ${(rssBeforeStall / MB).toFixed(1)} MB`);
    proxy.stall();
    const stallEnd = Date.now() + o.stallMs;
    while (Date.now() < stallEnd) {
      peakStall = Math.max(peakStall, sample());
      await sleep(sampleMs);
    }
    const deliveredDuringStall = delivered() - deliveredBeforeStall;
    log(`stall over: peak RSS during the stall ${(peakStall / MB).toFixed(1)} MB; resuming`);
    proxy.cut();
    proxy.resume();
    const resumed = Date.now();
    const deadline = resumed + 300_000;
    let n = delivered();
    while (n < o.messages && Date.now() < deadline) {
      sample();
      await sleep(sampleMs);
      n = delivered();
    }
    const resumeSeconds = (Date.now() - resumed) / 1000;
    if (peakStall >= limitBytes) problems.push(`peak RSS during the stall ${(peakStall / MB).toFixed(1)} MB >= ${(limitBytes / MB).toFixed(0)} MB`);
    if (n < o.messages) problems.push(`only ${n} of ${o.messages} messages arrived after the target returned`);
    for (const e of bridge.unexpectedExits) problems.push(e.slice(0, 300));
    return {
      messages: o.messages,
      rssBeforeStall,
      peakRssDuringStall: peakStall,
      peakRssOverall: peakAll,
      samples,
      deliveredBeforeStall,
      deliveredDuringStall,
      delivered: n,
      resumeSeconds,
      limitBytes,
      ok: problems.length === 0,
      problems,
    };
  } finally {
    await bridge.stop().catch(() => undefined);
    await Promise.allSettled([publisher.close(), target.stop()]);
    await proxy.stop();
    await o.admin.deleteVhost(vhost);
  }
}

export function formatBackpressure(r: BackpressureReport): string {
  const mb = (b: number) => `${(b / MB).toFixed(1)} MB`;
  return [
    `backpressure (AMQP→AMQP, ${r.messages} messages waiting, target stalled):`,
    `  RSS before the stall ${mb(r.rssBeforeStall)}; peak during the stall ${mb(r.peakRssDuringStall)} (limit ${mb(r.limitBytes)}); peak overall ${mb(r.peakRssOverall)}; ${r.samples} samples`,
    `  delivered before the stall ${r.deliveredBeforeStall}, during it ${r.deliveredDuringStall}, in total ${r.delivered}/${r.messages}; all arrived ${r.resumeSeconds.toFixed(1)} s after the target returned`,
    `  ${r.ok ? 'PASS' : `FAIL: ${r.problems.join('; ')}`}`,
  ].join('\n');
}
