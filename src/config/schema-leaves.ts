/**
 * The leaves of the schema of `bridges.yaml` (./schema.ts): each one says what would be valid in its own error message
 * ("expected …"), so that a problem report can say it; the loader appends what it got. And the sets of values the
 * schema and the checks share (URL schemes, log levels, filter-miss policies, bridge names).
 */
import { z } from 'zod';

export function intRange(min: number, max: number) {
  const error = `expected an integer from ${min} to ${max}`;
  return z.int({ error }).min(min, { error }).max(max, { error });
}

export function intAtLeast(min: number, what = 'an integer', note = '') {
  const error = `expected ${what} >= ${min}${note}`;
  return z.int({ error }).min(min, { error });
}

/** Durations are integer milliseconds. */
export function millis(min = 1) {
  return intAtLeast(min, 'a duration in milliseconds, an integer');
}

export function text(what: string) {
  const error = `expected ${what} (a non-empty string)`;
  return z.string({ error }).min(1, { error });
}

export function bool() {
  return z.boolean({ error: 'expected true or false' });
}

export function urlOf(schemes: readonly string[], example: string) {
  const error = `expected a URL starting with ${schemes.map((s) => `${s}://`).join(', ')} (e.g. ${example})`;
  return z.string({ error }).refine((u) => hasScheme(u, schemes), { error });
}

export function hasScheme(url: string, schemes: readonly string[]): boolean {
  if (!URL.canParse(url)) return false;
  const scheme = new URL(url).protocol.replace(/:$/, '').toLowerCase();
  return schemes.includes(scheme);
}

export function urlList(schemes: readonly string[], example: string) {
  const error = 'expected a non-empty list of URLs';
  return z.array(urlOf(schemes, example), { error }).min(1, { error });
}

export const AMQP_SCHEMES = ['amqp', 'amqps'] as const;
export const STOMP_SCHEMES = ['stomp', 'stomp+ssl', 'tcp'] as const;
/** NATS: `nats://` plain TCP, `tls://` TLS from the first byte (the nats.js spelling). */
export const NATS_SCHEMES = ['nats', 'tls'] as const;
export const MQTT_SCHEMES = ['mqtt', 'mqtts'] as const;
/** AMQP 1.0: `amqp://` plain TCP, `amqps://` TLS from the first byte (the same schemes as 0-9-1; `type` tells them apart). */
export const AMQP10_SCHEMES = ['amqp', 'amqps'] as const;
/** The longest packet MQTT can frame (a 4-byte remaining length: 268,435,455 bytes + 5 bytes of fixed header). */
export const MQTT_MAX_PACKET_BYTES = 268_435_460;
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
/** What a bridge does with a message its filter does not select (`filter-miss`). */
export const FILTER_MISS_POLICIES = ['skip', 'dead-letter'] as const;
export const BRIDGE_NAME_PATTERN = /^[A-Za-z0-9._-]+$/;

const clientIdError = 'expected an MQTT client identifier: 1 to 200 characters, no NUL';
export function clientId() {
  return z
    .string({ error: clientIdError })
    .min(1, { error: clientIdError })
    .max(200, { error: clientIdError })
    .refine((v) => !v.includes('\0'), { error: clientIdError });
}
