/**
 * One MQTT 5 PUBLISH whose properties are ~64 MiB of small user properties (issue 42): how long the bridge's MQTT
 * session takes from the first byte written to the message handed on (parsed, or refused by a limit), and the longest
 * the event loop was blocked meanwhile: the longest synchronous call of the session's socket handler, and
 * perf_hooks.monitorEventLoopDelay and a 10 ms timer probe (which also see GC and a busy machine's scheduling). A scripted broker
 * on 127.0.0.1, in a child process of its own (so that building and writing the packet is not measured), sends it,
 * then one small PUBLISH that shows the connection went on; the time counts from the first bytes read (the CONNACK).
 *
 *   node --import tsx bench/mqtt-properties.ts [--src DIR] [--mib 64] [--max-packet-size BYTES] [--timeout-s 120]
 *
 * `--src`: the src/ folder of the build to measure (e.g. an extract of an older commit, for before/after).
 * `--max-packet-size`: the session's limit (default 64 MiB, which the packet stays just under; lower it to measure the
 * skip of a PUBLISH over the limit).
 */
import { fork } from 'node:child_process';
import net from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import mqttPacket, { type IPublishPacket, type Packet } from 'mqtt-packet';

const args = process.argv.slice(2);
const arg = (name: string, fallback: string): string => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback;
};
const src = resolve(arg('src', 'src'));
const mib = Number(arg('mib', '64'));
const timeoutMs = Number(arg('timeout-s', '120')) * 1000;
const maxPacketSize = Number(arg('max-packet-size', String(64 * 1024 * 1024)));

/** A QoS 1 PUBLISH to `topic` with ~`bytes` of user properties (distinct names, 50-byte values), within max-packet-size. */
function hugePublish(topic: string, bytes: number): Buffer {
  const value = 'v'.repeat(50);
  const parts: Buffer[] = [];
  let size = 0;
  for (let i = 0; size < bytes - 100; i++) {
    const name = `k${i}`;
    const p = Buffer.alloc(1 + 2 + name.length + 2 + value.length);
    p[0] = 0x26;
    p.writeUInt16BE(name.length, 1);
    p.write(name, 3);
    p.writeUInt16BE(value.length, 3 + name.length);
    p.write(value, 5 + name.length);
    parts.push(p);
    size += p.length;
  }
  const props = Buffer.concat(parts);
  const varint = (n: number): number[] => {
    const out: number[] = [];
    do {
      let b = n % 128;
      n = Math.floor(n / 128);
      if (n > 0) b |= 0x80;
      out.push(b);
    } while (n > 0);
    return out;
  };
  const head = Buffer.from([0, topic.length, ...Buffer.from(topic), 0, 1, ...varint(props.length)]);
  const payload = Buffer.from('the body');
  const rest = head.length + props.length + payload.length;
  return Buffer.concat([Buffer.from([0x32, ...varint(rest)]), head, props, payload]);
}

if (args.includes('--broker')) {
  const packet = hugePublish('bench/huge', Math.min(mib, 64) * 1024 * 1024 - 1024);
  const small = mqttPacket.generate({ cmd: 'publish', topic: 'bench/next', qos: 1, messageId: 2, dup: false, retain: false, payload: Buffer.from('next') }, { protocolVersion: 5 });
  const server = net.createServer((s) => {
    s.on('error', () => undefined);
    const parser = mqttPacket.parser({ protocolVersion: 5 });
    parser.on('packet', (p: Packet) => {
      if (p.cmd !== 'connect') return;
      s.write(mqttPacket.generate({ cmd: 'connack', sessionPresent: false, reasonCode: 0, properties: { receiveMaximum: 100 } }, { protocolVersion: 5 }));
      s.write(packet);
      s.write(small);
    });
    s.on('data', (d: Buffer) => parser.parse(d));
  });
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as net.AddressInfo).port, packetBytes: packet.length }));
  process.on('disconnect', () => process.exit(0));
} else {
  await measure();
}

async function measure(): Promise<void> {
  const { MqttSession } = (await import(pathToFileURL(`${src}/endpoints/mqtt/mqtt-session.ts`).href)) as typeof import('../src/endpoints/mqtt/mqtt-session.js');
  const { silentLogger } = (await import(pathToFileURL(`${src}/shared/log.ts`).href)) as typeof import('../src/shared/log.js');
  const broker = fork(process.argv[1]!, [...args, '--broker'], { execArgv: process.execArgv });
  const { port, packetBytes } = await new Promise<{ port: number; packetBytes: number }>((r) => broker.once('message', (m) => r(m as never)));
  let started = 0;
  // The session's socket handler, timed: the longest synchronous read is the block the session itself causes, whatever
  // else the machine does (the probes below also see scheduling and GC).
  const proto = MqttSession.prototype as unknown as { read: (this: unknown, chunk: Buffer) => void };
  const read = proto.read;
  let longestRead = 0;
  let reads = 0;
  proto.read = function (this: unknown, chunk: Buffer) {
    const t0 = performance.now();
    if (started === 0) started = t0;
    read.call(this, chunk);
    reads += 1;
    longestRead = Math.max(longestRead, performance.now() - t0);
  };
  const seen: { topic: string; ms: number; userProperties: number; unreadable?: string }[] = [];
  let lost: string | undefined;
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  let probeMax = 0;
  let last = performance.now();
  const probe = setInterval(() => {
    const now = performance.now();
    probeMax = Math.max(probeMax, now - last - 10);
    last = now;
  }, 10);

  const conn = { name: 'bench', type: 'mqtt', urls: [`mqtt://127.0.0.1:${port}`], protocolVersion: 5, keepalive: 30, connectTimeout: 5000, sessionExpiry: 0, maxPacketSize };
  histogram.enable();
  const session = await MqttSession.open(conn as never, { host: '127.0.0.1', port, tls: false }, 5, {
    clientId: 'bench-properties',
    clean: true,
    onPublish: (p: IPublishPacket, _s: unknown, unreadable?: { detail: string }) => {
      seen.push({
        topic: p.topic,
        ms: Math.round(performance.now() - started),
        userProperties: Object.keys(p.properties?.userProperties ?? {}).length,
        ...(unreadable !== undefined ? { unreadable: unreadable.detail } : {}),
      });
    },
  }, silentLogger);
  session.onLost((e) => (lost = e.message));
  const deadline = Date.now() + timeoutMs;
  while (seen.length < 2 && lost === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  // The probes see a block on their next tick: give them one before reading them (the loop above may wake first).
  await new Promise((r) => setTimeout(r, 100));
  histogram.disable();
  clearInterval(probe);
  console.log(
    JSON.stringify(
      {
        src,
        packetBytes,
        handedOn: seen,
        lost,
        timedOut: seen.length < 2 && lost === undefined,
        eventLoopMaxBlockMs: Math.round(histogram.max / 1e6),
        timerProbeMaxLateMs: Math.round(probeMax),
      longestReadMs: Math.round(longestRead),
      readCalls: reads,
      },
      null,
      1,
    ),
  );
  session.destroy();
  broker.kill();
  process.exit(0);
}
