/**
 * Logging: one pino root logger, a child per bridge and per endpoint. Every URL that is logged goes through
 * redactUrl first, and pino's redact removes credential-shaped fields as a second line of defence.
 */
import { pino, type Logger } from 'pino';
import { redactUrl } from './errors.js';

export type { Logger };

export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({
    level,
    base: { service: 'broker-bridge' },
    redact: { paths: ['password', '*.password', 'passcode', '*.passcode', 'passphrase', '*.passphrase', 'tls', '*.tls', 'url', '*.url'], censor: '[redacted]' },
    serializers: {
      err: (err: unknown) => {
        const s = pino.stdSerializers.err(err as Error);
        if (typeof s.message === 'string') s.message = redactUrl(s.message);
        if (typeof s.stack === 'string') s.stack = redactUrl(s.stack);
        return s;
      },
    },
  });
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
