/**
 * Logging: one pino root logger, a child per bridge and per endpoint. Every URL that is logged goes through
 * redactUrl first, and every line is made safe as a second line of defence (./log-redaction.ts: secret-named fields
 * censored at any depth, credentials taken out of every string, the message and errors and their causes included,
 * no field longer than 4 KiB).
 */
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { PinoPretty } from 'pino-pretty';
import { redactUrl } from './errors.js';
import { CENSOR, SECRET_FIELDS, isSecretName, redactDeep, safeString } from './log-redaction.js';

export type { Logger };

export type LogFormat = 'json' | 'pretty';

/**
 * `json` (one object per line, for collectors) or `pretty` (for a person): LOG_FORMAT when set, else pretty when stdout
 * is a terminal.
 */
export function logFormat(env: Readonly<Record<string, string | undefined>>, isTty: boolean): LogFormat {
  const v = env.LOG_FORMAT?.toLowerCase();
  if (v === 'json' || v === 'pretty') return v;
  return isTty ? 'pretty' : 'json';
}

/**
 * `to`: where the lines go — stdout (the service's logs), stderr for a command whose stdout is its result (`move`
 * prints its summary and progress there), or a stream of the caller's (tests).
 */
export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info', format: LogFormat = 'json', to: 'stdout' | 'stderr' | DestinationStream = 'stdout'): Logger {
  if (typeof to === 'object') return pino({ level, base: { service: 'broker-bridge' }, ...SAFE_LINES }, to);
  const fd = to === 'stdout' ? 1 : 2;
  const tty = to === 'stdout' ? process.stdout.isTTY : process.stderr.isTTY;
  // pino's own pretty printer, in process (a synchronous stream), after redaction like the JSON lines.
  const destination: DestinationStream | undefined =
    format === 'pretty'
      ? PinoPretty({ colorize: tty, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service', sync: true, destination: fd })
      : to === 'stderr'
        ? pino.destination({ fd, sync: true })
        : undefined;
  const options = { level, base: { service: 'broker-bridge' }, ...SAFE_LINES };
  return destination === undefined ? pino(options) : pino(options, destination);
}

/**
 * What makes every line safe (./log-redaction.ts): the fields, the message and errors walked; and the finished line
 * once more for URL credentials, which covers a child logger's bindings (pino applies no formatter to those; a binding
 * named like a secret is censored by its serializer below, at the top level).
 */
const SAFE_LINES: Pick<LoggerOptions, 'formatters' | 'serializers' | 'hooks'> = {
  formatters: {
    log: (object) => redactDeep(object) as Record<string, unknown>,
  },
  hooks: { streamWrite: redactUrl },
  serializers: {
    ...Object.fromEntries(SECRET_FIELDS.map((name) => [name, () => CENSOR])),
    msg: (msg: unknown) => (typeof msg === 'string' ? safeString(msg) : msg),
    err: (err: unknown) => {
      const s = pino.stdSerializers.err(err as Error);
      // pino appends every cause's message to the error's own; ours already say what their causes said, so the
      // line would repeat itself. The causes stay in the stack ("caused by: …").
      if (typeof s.message === 'string') s.message = redactUrl(err instanceof Error ? err.message : s.message);
      // The stack keeps its length (a trace is worth its lines), its credentials go.
      if (typeof s.stack === 'string') s.stack = redactUrl(s.stack);
      // What else the error carries (a library's `options`, `config`, nested errors): as any logged field.
      const fields = s as unknown as Record<string, unknown>;
      for (const key of Object.keys(fields)) {
        if (key === 'message' || key === 'stack' || key === 'type') continue;
        fields[key] = isSecretName(key) ? CENSOR : redactDeep(fields[key], 1);
      }
      return s;
    },
  },
};

/** A logger that writes nothing, for tests of pure logic. */
export const silentLogger: Logger = pino({ level: 'silent' });

/** host:port[/vhost] of a URL, for messages ("connection to rabbit (localhost:5672) was refused"). */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    const path = u.pathname && u.pathname !== '/' ? u.pathname : '';
    return `${u.hostname}${u.port ? `:${u.port}` : ''}${path}`;
  } catch {
    return redactUrl(url);
  }
}
