/**
 * What a value taken from a message may contain when it becomes part of an address (./address-template.ts), one rule
 * for every protocol: a publisher chooses a value, never a destination (docs/design.md §10.2). A value is allowed when every
 * character of it matches the bridge's `template-values` pattern (default DEFAULT_TEMPLATE_VALUES), it is at most
 * MAX_VALUE_BYTES long, and it is not a run of dots alone; anything else is refused, and the message is dead-lettered
 * with reason `unsafe-address` (src/core/session/route.ts), never sent anywhere else.
 *
 * The configuration refuses a `template-values` pattern that admits a character the target's broker reads as
 * structure (ADDRESS_SEPARATORS below, plus every control and white-space character on every protocol); the token
 * separator (`.` on NATS, STOMP and AMQP topic exchanges) is refused per value instead, unless the bridge sets
 * `template-value-tokens: true` (docs/security.md#addresses-built-from-message-data): see
 * src/config/template-checks.ts. A new endpoint declares its protocol's separators here, in one line of
 * ADDRESS_SEPARATORS (docs/development.md says so).
 */

/**
 * The characters each protocol's brokers read as structure in an address. `chars` no template value may contain
 * whatever `template-values` says (a pattern that admits one is refused at load); control characters and white space
 * (ALWAYS_REFUSED) are refused on every protocol on top of these. `tokens` is the token separator where the target
 * splits its address into tokens that subscriptions, bindings and permissions match (`orders.>`, `#.admin.#`): a value
 * holding one would add tokens, so it is refused per value — not by refusing the pattern, since the default
 * `template-values` admits `.` and stays valid — unless the bridge says its values may span tokens
 * (`template-value-tokens: true`, ValueRuleOptions). `tokensAlways` false: only where the configuration says the
 * target splits (an AMQP topic exchange, src/config/target-address.ts targetSplitsTokens).
 */
export const ADDRESS_SEPARATORS = {
  // Topic exchanges: `*` and `#` are wildcards of bindings; a routing key holding one would look like a pattern. `.`
  // separates the words of a topic exchange's routing key only: a direct or the default exchange reads it as text.
  amqp: { chars: '*#', what: 'an AMQP topic-exchange wildcard', tokens: '.', tokensAlways: false, tokenWhat: "an AMQP topic exchange's word separator" },
  // ActiveMQ: `,` sends to several destinations at once (composite destinations), `*` `>` are wildcards, `?` starts the
  // destination options (`/queue/a?consumer.exclusive=true` is queue `a`); `/` starts another destination path
  // (/queue/…, /topic/…, RabbitMQ's /exchange/…); `#` is a wildcard of RabbitMQ and Artemis. `.` separates the tokens
  // that ActiveMQ's and Artemis's wildcards and authorization entries match, and the words of RabbitMQ's /topic/.
  stomp: { chars: ',/*>#?', what: 'a STOMP destination separator or wildcard', tokens: '.', tokensAlways: true, tokenWhat: 'the token separator of STOMP destinations (ActiveMQ, Artemis and RabbitMQ topics)' },
  // NATS subjects: `*` and `>` are wildcards (a publish to one is refused, a subscription would match many); `.`
  // separates tokens, which subscriptions, stream subjects and permissions match.
  nats: { chars: '*>', what: 'a NATS subject wildcard', tokens: '.', tokensAlways: true, tokenWhat: "NATS's subject token separator" },
  // MQTT topics: `/` separates levels (a value would add one: another topic), `+` and `#` are wildcards (a PUBLISH
  // to one is a protocol error that closes the connection). NUL, refused by MQTT, is a control character. A level
  // separator is always refused: MQTT has no token separator that a bridge may let values span.
  mqtt: { chars: '/+#', what: 'an MQTT topic level separator or wildcard', tokens: '', tokensAlways: false, tokenWhat: '' },
  // AMQP 1.0 node addresses: `/` separates the parts of RabbitMQ's (/exchange/<name>/<key>, /amq/queue/<name>: a value
  // would pick another exchange or queue); `*` `#` are Artemis's (and RabbitMQ topic bindings') wildcards, `>` and `,`
  // ActiveMQ's, `?` starts options; `.` separates the words Artemis's wildcards and security settings match, and those
  // of a topic exchange's routing key. `::` (Artemis's address::queue, a fully qualified queue name) is refused as a
  // pair: `:` alone is in the default template-values (doubled, below).
  amqp10: {
    chars: '/*#>?,',
    what: 'an AMQP 1.0 node address separator or wildcard',
    tokens: '.',
    tokensAlways: true,
    tokenWhat: "the word separator of AMQP 1.0 addresses (Artemis's wildcards, RabbitMQ topic keys)",
    doubled: ':',
    doubledWhat: "Artemis's address::queue separator",
  },
} as const satisfies Record<string, { chars: string; what: string; tokens: string; tokensAlways: boolean; tokenWhat: string; doubled?: string; doubledWhat?: string }>;

export type AddressProtocol = keyof typeof ADDRESS_SEPARATORS;

/** The default `template-values`: letters, digits, '.', '_', ':' and '-'. */
export const DEFAULT_TEMPLATE_VALUES = '[A-Za-z0-9._:-]';

/** Longest value taken from a message, in UTF-8 bytes (an AMQP routing key holds 255 in all). */
export const MAX_VALUE_BYTES = 255;

/** The longest part of a refused value the dead-letter header carries (MAX_VALUE_BYTES, then '…'). */
const UNSAFE_VALUE_SHOWN_BYTES = MAX_VALUE_BYTES;

/**
 * Control characters (C0, DEL, C1) and Unicode white space: refused in values on every protocol. They break frames and
 * lines (STOMP, NATS), split subjects (NATS), or make names that read as something else.
 */
// eslint-disable-next-line no-control-regex
const ALWAYS_REFUSED = /[\u0000-\u0020\u007f-\u00a0\u1680\u180e\u2000-\u200f\u2028-\u202f\u205f-\u2064\u3000\ufeff]/u;

/** The characters a `template-values` pattern is tried against at load: every separator, control and space. */
export function refusedCharacters(protocol: AddressProtocol): string[] {
  const out: string[] = [...ADDRESS_SEPARATORS[protocol].chars];
  for (let c = 0; c <= 0x20; c++) out.push(String.fromCharCode(c));
  for (let c = 0x7f; c <= 0xa0; c++) out.push(String.fromCharCode(c));
  for (const c of ['\u1680', '\u180e', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff']) out.push(c);
  for (let c = 0x2000; c <= 0x200f; c++) out.push(String.fromCharCode(c));
  return out;
}

/** One character as the configuration and the dead-letter detail show it: `','`, or `U+000A` for an invisible one. */
export function showCharacter(c: string): string {
  const code = c.codePointAt(0) ?? 0;
  const hex = `U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
  return ALWAYS_REFUSED.test(c) ? hex : `'${c}' (${hex})`;
}

/** A compiled `template-values` for one protocol: why a value is refused, or undefined when it may be used. */
export interface ValueRule {
  refuse(value: string): string | undefined;
}

/**
 * The pattern as a RegExp tried on one character at a time (anchored; `u` flag, so a character is a code point), or
 * the error of an invalid one.
 */
export function compileValuePattern(pattern: string): { ok: true; regex: RegExp } | { ok: false; error: string } {
  try {
    return { ok: true, regex: new RegExp(`^(?:${pattern})$`, 'u') };
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
  }
}

const DEFAULT_WHOLE = /^[A-Za-z0-9._:-]+$/;
const DEFAULT_ONE_TOKEN = /^[A-Za-z0-9_:-]+$/;
const ONLY_DOTS = /^\.+$/;

/** Where the target's address is split into tokens, and whether the bridge lets a value span them. */
export interface ValueRuleOptions {
  /** The target splits at its protocol's token separator; default: the protocol's tokensAlways (ADDRESS_SEPARATORS). */
  splitsTokens?: boolean;
  /** `template-value-tokens: true`: a value may hold the token separator (never an empty token). Default false. */
  valuesSpanTokens?: boolean;
}

/** Compiled rules by protocol, pattern and token mode: a bridge asks for its rule per message. */
const rules = new Map<string, ValueRule>();

/**
 * The rule of `template-values` `pattern` (default DEFAULT_TEMPLATE_VALUES) on `protocol`. The configuration checked
 * the pattern; one that does not compile here is a programmer error.
 */
export function valueRule(pattern: string = DEFAULT_TEMPLATE_VALUES, protocol: AddressProtocol, options: ValueRuleOptions = {}): ValueRule {
  const separator = (options.splitsTokens ?? ADDRESS_SEPARATORS[protocol].tokensAlways) ? ADDRESS_SEPARATORS[protocol].tokens : '';
  const mode: TokenMode = separator === '' ? 'none' : options.valuesSpanTokens === true ? 'span' : 'refuse';
  const key = `${protocol}\u0000${mode}\u0000${pattern}`;
  let rule = rules.get(key);
  if (rule === undefined) {
    rule = buildRule(pattern, protocol, mode);
    rules.set(key, rule);
  }
  return rule;
}

/** none: the target has no token separator; refuse: a value may not hold it; span: it may, between two tokens. */
type TokenMode = 'none' | 'refuse' | 'span';

function buildRule(pattern: string, protocol: AddressProtocol, mode: TokenMode): ValueRule {
  const compiled = compileValuePattern(pattern);
  if (!compiled.ok) throw new TypeError(`template-values '${pattern}' was not checked: ${compiled.error}`);
  const one = compiled.regex;
  const entry: { chars: string; what: string; tokens: string; tokenWhat: string; doubled?: string; doubledWhat?: string } = ADDRESS_SEPARATORS[protocol];
  const { chars: separators, what, tokens, tokenWhat, doubled = '', doubledWhat = '' } = entry;
  const fast = pattern === DEFAULT_TEMPLATE_VALUES ? (mode === 'refuse' ? DEFAULT_ONE_TOKEN : DEFAULT_WHOLE) : undefined;
  return {
    refuse(value: string): string | undefined {
      if (Buffer.byteLength(value, 'utf8') > MAX_VALUE_BYTES) return `is longer than ${MAX_VALUE_BYTES} bytes`;
      if (ONLY_DOTS.test(value)) return 'is only dots';
      if (mode === 'span' && (value.startsWith(tokens) || value.endsWith(tokens) || value.includes(tokens + tokens))) {
        return `makes an empty token (a ${showCharacter(tokens)} at an end or doubled; ${tokenWhat})`;
      }
      // A character allowed alone that the broker reads as structure doubled: refused doubled, and at either end, where a
      // neighbouring literal or value could double it.
      if (doubled !== '' && (value.includes(doubled + doubled) || value.startsWith(doubled) || value.endsWith(doubled))) {
        return `contains ${showCharacter(doubled)} doubled or at an end (${doubledWhat})`;
      }
      if (fast?.test(value)) return undefined;
      // One character at a time: a pattern is never run over the whole value (no backtracking over attacker input).
      for (const c of value) {
        if (ALWAYS_REFUSED.test(c)) return `contains ${showCharacter(c)}, a control or white-space character`;
        if (separators.includes(c)) return `contains ${showCharacter(c)}, ${what}`;
        if (mode === 'refuse' && c === tokens) {
          return `contains ${showCharacter(c)}, ${tokenWhat}: it would add a token (template-value-tokens: true lets values span tokens)`;
        }
        if (!one.test(c)) return `contains ${showCharacter(c)}, which template-values ${pattern} does not allow`;
      }
      return undefined;
    },
  };
}

/**
 * A refused value as the dead-letter header `x-bridge-unsafe-value` carries it: its first UNSAFE_VALUE_SHOWN_BYTES
 * bytes of UTF-8, with every byte outside printable ASCII, and '%' itself, percent-encoded (so no control character,
 * line break or invalid UTF-8 reaches a header), and '…' when it was cut.
 */
export function encodeUnsafeValue(value: string): string {
  const bytes = Buffer.from(value, 'utf8');
  const shown = bytes.subarray(0, UNSAFE_VALUE_SHOWN_BYTES);
  let out = '';
  for (const b of shown) out += b > 0x20 && b < 0x7f && b !== 0x25 ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  return bytes.length > shown.length ? `${out}…` : out;
}
