/**
 * Issue 42's first row, measured (docs/measurements.md, "One bad AMQP message"): two bridges A and B of one process on
 * one configured AMQP connection, one message whose headers nest a table 8,000 deep published to A's source, then 500
 * ordinary messages to each source, 40 s to forward them (test/support/amqp-deep-headers.ts). Prints what B and A
 * forwarded, what A dead-lettered and with which reason, each bridge's sessions started, what is left in A's source, and
 * the log lines at warn or above with their counts.
 *
 *   npm run build && AMQP_URL=… REDIS_URL=… node --import tsx bench/blast-radius-amqp.ts [--depth 8000] [--messages 500]
 *
 * BRIDGE_CLI (another build's dist/cli.js) measures that build instead.
 */
import { parseArgs } from 'node:util';
import { runFirstRow } from '../test/support/amqp-deep-headers.js';

process.env.AMQP_URL ??= 'amqp://guest:guest@127.0.0.1:5672';
process.env.REDIS_URL ??= 'redis://127.0.0.1:6379';

const { values } = parseArgs({ options: { depth: { type: 'string', default: '8000' }, messages: { type: 'string', default: '500' }, seconds: { type: 'string', default: '40' } } });
const perSource = Number(values.messages);
const row = await runFirstRow({ depth: Number(values.depth), perSource, deadlineMs: Number(values.seconds) * 1000 });
console.log(`one message with a table nested ${values.depth} deep to A's source, then ${perSource} to each source, ${values.seconds} s:`);
const when = (ms: number | undefined) => (ms === undefined ? 'not all by the deadline' : `all after ${(ms / 1000).toFixed(1)} s`);
console.log(`  B forwarded ${row.bForwarded} / ${perSource} (${when(row.doneMs.b)}); A forwarded ${row.aForwarded} / ${perSource} (${when(row.doneMs.a)})`);
for (const m of row.deadLettered) {
  console.log(`  A's dead-letter queue: body ${JSON.stringify(m.body.toString())}, message-id ${String(m.properties.messageId)}, reason ${String(m.headers['x-bridge-dead-letter-reason'])}, dropped ${String(m.headers['x-bridge-dropped'])}, detail ${JSON.stringify(m.headers['x-bridge-dead-letter-detail'])}`);
}
if (row.deadLettered.length === 0) console.log("  A's dead-letter queue: empty");
console.log(`  sessions started: A ${row.sessions.a[0]} → ${row.sessions.a[1]}, B ${row.sessions.b[0]} → ${row.sessions.b[1]}; left in A's source: ${row.leftInSourceA}`);
for (const [msg, n] of row.warnings) console.log(`  log ×${n}: ${msg}`);
