/**
 * Logging: one pino root logger, a child per bridge and per endpoint. Every URL that is logged goes through
 * redactUrl first, and pino's redact removes credential-shaped fields as a second line of defence.
 */
import { pino, type DestinationStream, type Logger } from 'pino';
import { PinoPretty } from 'pino-pretty';
import { redactUrl } from './errors.js';

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
 * `to`: where the lines go — stdout (the service's logs), or stderr for a command whose stdout is its result (`move`
 * prints its summary and progress there).
 */
export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info', format: LogFormat = 'json', to: 'stdout' | 'stderr' = 'stdout'): Logger {
  const fd = to === 'stdout' ? 1 : 2;
  const tty = to === 'stdout' ? process.stdout.isTTY : process.stderr.isTTY;
  // pino's own pretty printer, in process (a synchronous stream), after redaction like the JSON lines.
  const destination: DestinationStream | undefined =
    format === 'pretty'
      ? PinoPretty({ colorize: tty, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service', sync: true, destination: fd })
      : to === 'stderr'
        ? pino.destination({ fd, sync: true })
        : undefined;
  const options = {
    level,
    base: { service: 'broker-bridge' },
    redact: { paths: ['password', '*.password', 'passcode', '*.passcode', 'passphrase', '*.passphrase', 'tls', '*.tls', 'url', '*.url'], censor: '[redacted]' },
    serializers: {
      err: (err: unknown) => {
        const s = pino.stdSerializers.err(err as Error);
        // pino appends every cause's message to the error's own; ours already say what their causes said, so the
        // line would repeat itself. The causes stay in the stack ("caused by: …").
        if (typeof s.message === 'string') s.message = redactUrl(err instanceof Error ? err.message : s.message);
        if (typeof s.stack === 'string') s.stack = redactUrl(s.stack);
        return s;
      },
    },
  };
  return destination === undefined ? pino(options) : pino(options, destination);
}

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
