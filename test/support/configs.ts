/** Builds bridges.yaml texts for tests, with unique cache key prefixes so tests never share duplicate-ID caches. */
import { services, uniqueName } from './services.js';
import { RABBITMQ_STOMP_VHOST } from './stomp.js';

/**
 * `rabbit` (AMQP), `activemq` (ActiveMQ's STOMP, STOMP_URL), `rabbitstomp` (RabbitMQ's STOMP, RABBITMQ_STOMP_URL);
 * `rabbitalias`: the same RabbitMQ under a second name (see secondName).
 */
export type ConnectionName = 'rabbit' | 'activemq' | 'rabbitstomp' | 'nats' | 'rabbitalias' | 'rabbit10';

/**
 * The same broker under a second name (127.0.0.1 ↔ localhost, else the host with a trailing dot): the loop path knows
 * a broker by the name its URL gives it (docs/delivery.md#loops), so a round trip there and back to this name is not a
 * loop. For tests whose subject is what a round trip keeps, not loop prevention.
 */
export function secondName(url: string): string {
  const u = new URL(url);
  u.hostname = u.hostname === '127.0.0.1' ? 'localhost' : u.hostname === 'localhost' ? '127.0.0.1' : `${u.hostname}.`;
  return u.toString();
}

export interface BridgeYamlOptions {
  name?: string;
  sourceConnection?: ConnectionName;
  /** The queue; on a NATS source, the stream (read through `sourceConsumer`, default `bridge`). */
  sourceQueue: string;
  sourceConsumer?: string;
  /** `exclusive: true` on the source (one active bridge, the others stand by). */
  sourceExclusive?: boolean;
  targetConnection?: ConnectionName;
  /** Raw YAML for the target mapping's body, e.g. `queue: out` or `exchange: x, routing-key: k`. */
  target: string;
  deadLetter?: string;
  extra?: Record<string, string | number | boolean>;
}

export interface ConfigOptions {
  bridges: BridgeYamlOptions[];
  keyPrefix?: string;
  idCache?: Record<string, string | number | boolean>;
  redisUrl?: string;
  amqpUrl?: string;
  stompUrl?: string;
  rabbitStompUrl?: string;
  /** The NATS server of the `nats` connection (default NATS_URL). */
  natsUrl?: string;
  logLevel?: string;
  shutdownTimeout?: number;
  /** More top-level keys, written as given (e.g. `{ 'http-port': 0 }`). */
  top?: Record<string, string | number | boolean>;
}

export function bridgeConfig(o: ConfigOptions): { yaml: string; keyPrefix: string } {
  const keyPrefix = o.keyPrefix ?? uniqueName('bbtest');
  const idCache = { 'key-prefix': keyPrefix, 'redis-url': o.redisUrl ?? services.redisUrl, ...o.idCache };
  const lines = [
    `log-level: ${o.logLevel ?? 'info'}`,
    `shutdown-timeout: ${o.shutdownTimeout ?? 10000}`,
    ...Object.entries(o.top ?? {}).map(([k, v]) => `${k}: ${typeof v === 'string' ? JSON.stringify(v) : v}`),
    'connections:',
    `  rabbit: { type: amqp, url: "${o.amqpUrl ?? services.amqpUrl}" }`,
  ];
  if (o.bridges.some((b) => b.sourceConnection === 'rabbitalias' || b.targetConnection === 'rabbitalias')) {
    lines.push(`  rabbitalias: { type: amqp, url: "${secondName(o.amqpUrl ?? services.amqpUrl)}" }`);
  }
  const needsStomp = o.bridges.some((b) => b.sourceConnection === 'activemq' || b.targetConnection === 'activemq' || (b.deadLetter ?? '').includes('activemq'));
  if (needsStomp || o.stompUrl) lines.push(`  activemq: { type: stomp, url: "${o.stompUrl ?? services.stompUrl}" }`);
  const needsRabbitStomp = o.bridges.some((b) => b.sourceConnection === 'rabbitstomp' || b.targetConnection === 'rabbitstomp' || (b.deadLetter ?? '').includes('rabbitstomp'));
  if (needsRabbitStomp || o.rabbitStompUrl) {
    lines.push(`  rabbitstomp: { type: stomp, url: "${o.rabbitStompUrl ?? services.rabbitStompUrl}", host: "${RABBITMQ_STOMP_VHOST}" }`);
  }
  const needsNats = o.bridges.some((b) => b.sourceConnection === 'nats' || b.targetConnection === 'nats' || (b.deadLetter ?? '').includes('nats'));
  if (needsNats || o.natsUrl) lines.push(`  nats: { type: nats, url: "${o.natsUrl ?? process.env.NATS_URL ?? 'nats://127.0.0.1:4222'}" }`);
  const needsAmqp10 = o.bridges.some((b) => b.sourceConnection === 'rabbit10' || b.targetConnection === 'rabbit10' || (b.deadLetter ?? '').includes('rabbit10'));
  // AMQP 1.0 through RabbitMQ's plugin, which listens beside 0-9-1 (enabled by the global setup).
  if (needsAmqp10) lines.push(`  rabbit10: { type: amqp10, url: "${o.amqpUrl ?? services.amqpUrl}" }`);
  lines.push('id-cache:');
  for (const [k, v] of Object.entries(idCache)) lines.push(`  ${k}: ${typeof v === 'string' ? JSON.stringify(v) : v}`);
  lines.push('bridges:');
  for (const b of o.bridges) {
    lines.push(`  - name: ${b.name ?? 'test-bridge'}`);
    const what = b.sourceConnection === 'nats' ? `stream: "${b.sourceQueue}", consumer: "${b.sourceConsumer ?? 'bridge'}"` : `queue: "${b.sourceQueue}"`;
    lines.push(`    source: { connection: ${b.sourceConnection ?? 'rabbit'}, ${what}${b.sourceExclusive ? ', exclusive: true' : ''} }`);
    lines.push(`    target: { connection: ${b.targetConnection ?? 'rabbit'}, ${b.target} }`);
    if (b.deadLetter) lines.push(`    dead-letter: { ${b.deadLetter} }`);
    for (const [k, v] of Object.entries(b.extra ?? {})) lines.push(`    ${k}: ${v}`);
  }
  return { yaml: lines.join('\n') + '\n', keyPrefix };
}

/** The loop path's name of the broker at `url` (src/config/broker-name.ts), for asserting x-bridge-path; AMQP: vhost `/`. */
export function pathName(url: string): string {
  const u = new URL(url);
  const scheme = u.protocol.replace(/:$/, '');
  const port = u.port || { amqp: '5672', stomp: '61613', mqtt: '1883', nats: '4222' }[scheme];
  return `${scheme}://${u.hostname}:${port}${scheme === 'amqp' ? '/%2F' : ''}`;
}
