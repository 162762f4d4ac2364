/**
 * What making every log line safe costs (src/shared/log-redaction.ts): the bridge's logger against the same pino with
 * the path-based redaction it replaces (`redact` paths password, *.password, passcode, …, url, *.url and the same err
 * serializer), writing to a null stream, for the lines the bridge writes: a warn with a few fields (a refusal), an
 * error with an error and its cause, a line with a nested object, and a debug line while the level is info (what the
 * hot path logs per message: nothing, the level check). ns per line, median of 5 rounds, CPU of this process.
 *
 *   node --import tsx bench/log-redaction.ts [--lines 200000]
 */
import { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { pino, type Logger } from 'pino';
import { createLogger } from '../src/shared/log.js';
import { TransientError, redactUrl } from '../src/shared/errors.js';

const { values } = parseArgs({ options: { lines: { type: 'string', default: '200000' } } });
const LINES = Number(values.lines);

const sink = (): Writable =>
  new Writable({
    write(_chunk, _enc, done) {
      done();
    },
  });

/** The logger as it was before (commit 9828aec's createLogger, JSON to a stream). */
function before(): Logger {
  return pino(
    {
      level: 'info',
      base: { service: 'broker-bridge' },
      redact: { paths: ['password', '*.password', 'passcode', '*.passcode', 'passphrase', '*.passphrase', 'tls', '*.tls', 'url', '*.url'], censor: '[redacted]' },
      serializers: {
        err: (err: unknown) => {
          const s = pino.stdSerializers.err(err as Error);
          if (typeof s.message === 'string') s.message = redactUrl(err instanceof Error ? err.message : s.message);
          if (typeof s.stack === 'string') s.stack = redactUrl(s.stack);
          return s;
        },
      },
    },
    sink(),
  );
}

const cause = new Error('connect ECONNREFUSED 127.0.0.1:5672');
const err = new TransientError("connection to rabbit (127.0.0.1:5672) was refused", { cause });
const shapes: [string, (log: Logger, i: number) => void][] = [
  ['warn, 3 fields', (log, i) => log.warn({ duplicateId: `id-${i}`, attempt: 2, reason: 'unroutable' }, 'target refused a message: sending it again')],
  ['error with err + cause', (log) => log.error({ err }, 'connection lost, reconnecting')],
  ['info, nested object', (log, i) => log.info({ peer: '127.0.0.1:61613', profile: { stableMessageId: true, prefetchHeader: 'activemq.prefetchSize', n: i } }, 'stomp source consuming')],
  ['debug below the level', (log, i) => log.debug({ duplicateId: `id-${i}` }, 'per-message line')],
];

function nsPerLine(log: Logger, line: (log: Logger, i: number) => void): number {
  const start = process.cpuUsage();
  for (let i = 0; i < LINES; i++) line(log, i);
  const used = process.cpuUsage(start);
  return ((used.user + used.system) * 1000) / LINES;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

console.log(`| line (${LINES} each, median of 5) | before: pino redact paths | after: safe lines | after / before |`);
console.log('| --- | ---: | ---: | ---: |');
for (const [name, line] of shapes) {
  const a: number[] = [];
  const b: number[] = [];
  const old = before();
  const now = createLogger('info', 'json', sink());
  for (let round = 0; round < 5; round++) {
    a.push(nsPerLine(old, line));
    b.push(nsPerLine(now, line));
  }
  console.log(`| ${name} | ${median(a).toFixed(0)} ns | ${median(b).toFixed(0)} ns | ${(median(b) / median(a)).toFixed(2)}x |`);
}
