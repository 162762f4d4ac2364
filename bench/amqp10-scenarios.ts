/**
 * AMQP 1.0 → AMQP 0-9-1 in the bench: the bridge (`type: amqp10` source on RabbitMQ's rabbitmq_amqp1_0 plugin, an
 * amqp target on the same RabbitMQ) beside a plain rhea → amqplib loop with the same safety — the 1.0 delivery is
 * accepted (settled) only after the publisher confirm of its copy (a mandatory, persistent publish) — and the same
 * window: at most PREFETCH messages credited or unsettled, credit topped up a quarter of the window at a time, as the
 * bridge's source keeps it (src/endpoints/amqp10/amqp10-source.ts). rhea's own `credit_window` does not bound that:
 * it refills the credit on every arrival whatever is still unsettled, so the loop gives credit by hand.
 *
 * The plugin listens beside 0-9-1 on AMQP_URL's host and port (its path, a virtual host, goes as `vhost:<name>`).
 *
 * The source is filled over 0-9-1, each message with a `message-id` (a 1.0 consumer gets the body as one data section
 * and the message-id; 0-9-1 headers do not cross). Both sides read the same messages, so the plugin's 0-9-1 → 1.0
 * conversion costs them the same. The bridge takes the message-id as the duplicate ID (the source's stable identity:
 * no ID is stamped and no fingerprint taken) and publishes it as `_AMQ_DUPL_ID` and `message-id`; the loop publishes
 * the same properties. Filling over 1.0 instead would give both sides application properties (header IDs); the
 * 0-9-1 fill is the one the other scenarios use (./harness.ts), and how fast a fill is does not enter the figures.
 *
 * The plugin (RabbitMQ 3.10) sends past the credit: it sets its queue's credit from the link's delivery-count, which
 * counts only transfers already written, so what the queue had already handed to the session goes out on top. rhea
 * says so on stderr ("Received transfer when credit was 0") for each such transfer; both sides get them, and up to
 * about twice the window is unsettled at once (each run prints how many, and the loop its most unsettled).
 */
import amqp from 'amqplib';
import rhea, { type Connection, type EventContext, type Message } from 'rhea';
import { BridgeProcess, writeConfig } from '../test/support/bridge-process.js';
import { cpuSplitMs, ownCpuMs } from './process-cpu.js';
import { PREFETCH, deleteAmqpQueues, deleteCacheKeys, peakRssMb, prefillAmqpOptions, uniq, waitAmqpCount, type Scenario } from './harness.js';
import { type RunResult, WARMUP, Window } from './window.js';

const amqpUrl = () => process.env.AMQP_URL!;
const nodeOf = (queue: string) => `/amq/queue/${queue}`;

/** A rhea connection to the plugin (the virtual host of AMQP_URL, '/' when it names none); rejects when it does not open. */
function open10(name: string): Promise<Connection> {
  const u = new URL(amqpUrl());
  const vhost = u.pathname.length > 1 ? decodeURIComponent(u.pathname.slice(1)) : '/';
  const conn = rhea.create_container({ id: uniq(name) }).connect({
    host: u.hostname,
    port: Number(u.port || 5672),
    username: decodeURIComponent(u.username || 'guest'),
    password: decodeURIComponent(u.password || 'guest'),
    hostname: `vhost:${vhost}`,
    reconnect: false,
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`AMQP 1.0 at ${u.host} did not open within 5 s`)), 5000);
    conn.once('connection_open', () => {
      clearTimeout(timer);
      resolve(conn);
    });
    conn.once('connection_error', (ctx: EventContext) => reject(new Error(`AMQP 1.0 open refused: ${JSON.stringify(ctx.connection.error)}`)));
    conn.once('disconnected', (ctx: EventContext) => {
      clearTimeout(timer);
      reject(new Error(`AMQP 1.0 connection to ${u.host} failed: ${String(ctx.error ?? 'disconnected')}`));
    });
    conn.on('error', () => undefined);
  });
}

function close10(conn: Connection): void {
  try {
    conn.close();
  } catch {
    // Already gone.
  }
}

/** rhea's line (lib/session.js) for a transfer that came when the link had no credit left, to stderr by console.error. */
const PAST_CREDIT = 'Received transfer when credit was';

/**
 * Counts rhea's past-credit lines in this process instead of printing them: the plugin sends them by the thousand
 * (the module comment), which would bury the bench's own output. Other lines pass through.
 */
function quietPastCredit(): { count: () => number; restore: () => void } {
  const original = console.error;
  let n = 0;
  console.error = (...args: unknown[]) => {
    if (typeof args[0] === 'string' && args[0].startsWith(PAST_CREDIT)) n += 1;
    else original(...args);
  };
  return { count: () => n, restore: () => void (console.error = original) };
}

/** Fills `queue` over 0-9-1: WARMUP + n persistent 1 KiB messages, each with a message-id of its own (the module comment). */
function prefill10(queue: string, n: number, ...others: string[]): Promise<void> {
  return prefillAmqpOptions(queue, n, (i) => ({ messageId: `${queue}-${i}` }), ...others);
}

/** The bytes of a data section (what the plugin makes of a 0-9-1 body). */
function bodyOf(m: Message): Buffer {
  const b: unknown = m.body;
  if (Buffer.isBuffer(b)) return b;
  if (b !== null && typeof b === 'object' && 'content' in b && Buffer.isBuffer(b.content)) return b.content;
  throw new Error('an AMQP 1.0 message without a data section');
}

/** AMQP 1.0 → AMQP through the real bridge process, until the target queue holds everything. */
async function amqp10ToAmqpBridge(n: number): Promise<RunResult> {
  const src = uniq('a10src');
  const dst = uniq('a10dst');
  await prefill10(src, WARMUP + n, dst);
  const keyPrefix = uniq('cache');
  const file = writeConfig(`log-level: info
connections:
  rabbit: { type: amqp, url: "${amqpUrl()}" }
  rabbit10: { type: amqp10, url: "${amqpUrl()}" }
id-cache:
  redis-url: "${process.env.REDIS_URL}"
  key-prefix: ${keyPrefix}
  id-cache-size: ${Math.max(2000, PREFETCH * 2)}
bridges:
  - name: bench
    source: { connection: rabbit10, address: "${nodeOf(src)}" }
    target: { connection: rabbit, queue: "${dst}" }
    prefetch: ${PREFETCH}
`);
  const p = BridgeProcess.start(file);
  try {
    await p.waitForLog((l) => l.msg === 'bridge running', 60_000);
    const running = p.logs.find((l) => l.msg === 'bridge running');
    const window = new Window(n, () => cpuSplitMs(p.child.pid));
    if (typeof running?.time === 'number') window.started = running.time;
    await waitAmqpCount(dst, window);
    const result = window.result({ rssMb: peakRssMb(p.child.pid) });
    const past = p.stderr.join('').split(PAST_CREDIT).length - 1;
    console.log(`    (bridge: ${past} transfers came past the credit it gave)`);
    return result;
  } finally {
    // A profiled bridge must exit by itself to write its profile.
    await p.kill(process.env.BRIDGE_NODE_ARGS?.includes('-prof') ? 'SIGTERM' : 'SIGKILL');
    await deleteCacheKeys(keyPrefix);
    await deleteAmqpQueues(src, dst);
  }
}

/**
 * Plain rhea receiver (credit by hand, no auto-accept) → amqplib confirm-publish (mandatory, persistent) → accept on
 * the confirm. It publishes what the bridge does for these messages: the body, persistent, the message-id, the plugin's
 * `subject` (the routing key it was published with) as `type`, and the message-id as `_AMQ_DUPL_ID`.
 */
async function amqp10ToAmqpPlain(n: number): Promise<RunResult> {
  const src = uniq('a10src-plain');
  const dst = uniq('a10dst-plain');
  await prefill10(src, WARMUP + n, dst);
  const conn = await amqp.connect(amqpUrl());
  let conn10: Connection | undefined;
  const noise = quietPastCredit();
  try {
    const ch = await conn.createConfirmChannel();
    conn10 = await open10('plain');
    const receiver = conn10.open_receiver({ source: { address: nodeOf(src) }, credit_window: 0, autoaccept: false });
    // Credit given so far and deliveries accepted: their difference is the credit left plus the unsettled.
    let granted = 0;
    let accepted = 0;
    // Deliveries received, and the most ever unsettled: beyond PREFETCH when the plugin sends past the credit.
    let received = 0;
    let mostUnsettled = 0;
    const topUp = (eager: boolean): void => {
      const want = PREFETCH - (granted - accepted);
      if (want <= 0 || (!eager && want < Math.max(1, Math.ceil(PREFETCH / 4)))) return;
      granted += want;
      receiver.add_credit(want);
    };
    const window = new Window(n, ownCpuMs);
    await new Promise<void>((resolve, reject) => {
      receiver.once('receiver_open', () => topUp(true));
      receiver.on('receiver_error', (ctx: EventContext) => reject(new Error(`receiver closed: ${JSON.stringify(ctx.receiver?.error)}`)));
      receiver.on('message', (ctx: EventContext) => {
        const m = ctx.message;
        const d = ctx.delivery;
        if (m === undefined || d === undefined) return;
        received += 1;
        mostUnsettled = Math.max(mostUnsettled, received - accepted);
        const id = typeof m.message_id === 'string' ? m.message_id : String(m.message_id);
        const options: amqp.Options.Publish = { persistent: true, mandatory: true, messageId: id, headers: { _AMQ_DUPL_ID: id } };
        if (typeof m.subject === 'string') options.type = m.subject;
        ch.publish('', dst, bodyOf(m), options, (err) => {
          if (err) return reject(new Error(`publish not confirmed: ${String(err)}`));
          d.accept();
          accepted += 1;
          topUp(false);
          if (window.count(accepted)) resolve();
        });
      });
    });
    const result = window.result();
    console.log(`    (loop: ${noise.count()} transfers came past the credit it gave; at most ${mostUnsettled} unsettled at once, window ${PREFETCH})`);
    return result;
  } finally {
    noise.restore();
    if (conn10 !== undefined) close10(conn10);
    await conn.close().catch(() => undefined);
    await deleteAmqpQueues(src, dst);
  }
}

async function amqp10Unavailable(): Promise<string | undefined> {
  try {
    close10(await open10('probe'));
    return undefined;
  } catch (err) {
    return `RabbitMQ's AMQP 1.0 plugin does not answer at AMQP_URL's host (${(err as Error).message}; rabbitmq_amqp1_0 enabled?)`;
  }
}

const PLAIN = 'rhea → amqplib loop (confirm, then accept)';

export const amqp10Scenarios: Scenario[] = [
  { group: 'amqp10→amqp', name: PLAIN, run: amqp10ToAmqpPlain, unavailable: amqp10Unavailable },
  { group: 'amqp10→amqp', name: 'bridge ← AMQP 1.0 (message-id as ID)', baseline: PLAIN, run: amqp10ToAmqpBridge, unavailable: amqp10Unavailable },
];
