/**
 * MQTT reason codes (MQTT 5, section 2.4) and 3.1.1 CONNACK return codes as sentences, and which of them no retry can
 * fix. Only the MQTT endpoints read them: like AMQP reply codes and STOMP ERROR frames, they stay with their protocol.
 */

const NAMES: Record<number, string> = {
  0x00: 'success',
  0x10: 'no matching subscribers',
  0x80: 'unspecified error',
  0x81: 'malformed packet',
  0x82: 'protocol error',
  0x83: 'implementation specific error',
  0x84: 'unsupported protocol version',
  0x85: 'client identifier not valid',
  0x86: 'bad user name or password',
  0x87: 'not authorized',
  0x88: 'server unavailable',
  0x89: 'server busy',
  0x8a: 'banned',
  0x8b: 'server shutting down',
  0x8c: 'bad authentication method',
  0x8d: 'keep alive timeout',
  0x8e: 'session taken over',
  0x8f: 'topic filter invalid',
  0x90: 'topic name invalid',
  0x91: 'packet identifier in use',
  0x93: 'receive maximum exceeded',
  0x94: 'topic alias invalid',
  0x95: 'packet too large',
  0x96: 'message rate too high',
  0x97: 'quota exceeded',
  0x98: 'administrative action',
  0x99: 'payload format invalid',
  0x9a: 'retain not supported',
  0x9b: 'QoS not supported',
  0x9c: 'use another server',
  0x9d: 'server moved',
  0x9e: 'shared subscriptions not supported',
  0x9f: 'connection rate exceeded',
  0xa0: 'maximum connect time',
  0xa1: 'subscription identifiers not supported',
  0xa2: 'wildcard subscriptions not supported',
};

/** `not authorized (0x87)`. */
export function reasonName(code: number): string {
  return `${NAMES[code] ?? 'reason'} (0x${code.toString(16).padStart(2, '0')})`;
}

/** MQTT 3.1.1 CONNACK return codes (section 3.2.2.3). */
const RETURN_CODES: Record<number, string> = {
  1: 'unacceptable protocol version',
  2: 'client identifier rejected',
  3: 'server unavailable',
  4: 'bad user name or password',
  5: 'not authorized',
};

/** CONNACK refusals a retry cannot fix: the login, the client id, a ban, the authentication method. */
const PERMANENT_5 = new Set([0x85, 0x86, 0x87, 0x8a, 0x8c]);
const PERMANENT_4 = new Set([2, 4, 5]);

/** A refusing CONNACK as a sentence, and whether it is permanent (a configuration error) or worth retrying. */
export function connackSentence(version: 4 | 5, code: number, reasonString?: string): { sentence: string; permanent: boolean } {
  const name = version === 5 ? reasonName(code) : `${RETURN_CODES[code] ?? 'refused'} (return code ${code})`;
  const detail = reasonString !== undefined && reasonString !== '' ? `: ${reasonString}` : '';
  const permanent = version === 5 ? PERMANENT_5.has(code) : PERMANENT_4.has(code);
  const hint = permanent && (code === 0x85 || code === 2) ? ' (set client-id on the connection or the endpoint)' : '';
  return { sentence: `${name}${detail}${hint}`, permanent };
}

/** Why an MQTT 5 broker sent DISCONNECT, as a sentence; `clientId` is named when another client took the session over. */
export function disconnectSentence(code: number, reasonString: string | undefined, clientId: string): string {
  const detail = reasonString !== undefined && reasonString !== '' ? `: ${reasonString}` : '';
  const hint =
    code === 0x8e
      ? ` (another client connected with client id '${clientId}': two processes, or two endpoints, must never share one; give each replica its own client-id)`
      : '';
  return `${reasonName(code)}${detail}${hint}`;
}

/** The broker has no room now: backpressure, not a bad message. */
export const PUBACK_QUOTA_EXCEEDED = 0x97;
/** Success, with no subscriber to deliver to: the broker dropped the message. */
export const PUBACK_NO_SUBSCRIBERS = 0x10;
