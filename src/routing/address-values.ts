/**
 * What a value taken from a message may contain when it becomes part of an address (./address-template.ts), one rule
 * for every protocol: a publisher chooses a value, never a destination (docs/design.md §10.2). A value is allowed when every
 * character of it matches the bridge's `template-values` pattern (default DEFAULT_TEMPLATE_VALUES), it is at most
 * MAX_VALUE_BYTES long, and it is not a run of dots alone; anything else is refused, and the message is dead-lettered
 * with reason `unsafe-address` (src/core/session/route.ts), never sent anywhere else.
 *
 * The configuration refuses a `template-values` pattern that admits a character the target's broker reads as
 * structure (its AddressSyntax below, plus every control and white-space character on every protocol); the token
 * separator (`.` on NATS, STOMP and AMQP topic exchanges) is refused per value instead, unless the bridge sets
 * `template-value-tokens: true` (docs/security.md#addresses-built-from-message-data): see
 * src/config/template-checks.ts. A protocol declares its syntax in its configuration record
 * (src/config/protocols/<protocol>.ts `addressSyntax`); routing knows no protocol by name.
 */

/**
 * What a protocol's brokers read as structure in an address, declared by the protocol's record
 * (src/config/protocols/<protocol>.ts `addressSyntax`). `chars` no template value may contain whatever
 * `template-values` says (a pattern that admits one is refused at load); control characters and white space
 * (ALWAYS_REFUSED) are refused on every protocol on top of these. `tokens` is the token separator where the target
 * splits its address into tokens that subscriptions, bindings and permissions match (`orders.>`, `#.admin.#`): a value
 * holding one would add tokens, so it is refused per value — not by refusing the pattern, since the default
 * `template-values` admits `.` and stays valid — unless the bridge says its values may span tokens
 * (`template-value-tokens: true`, ValueRuleOptions). `tokensAlways` false: only where the configuration says the
 * target splits (an AMQP topic exchange, src/config/target-address.ts targetSplitsTokens).
 */
export interface AddressSyntax {
  readonly chars: string;
  /** What `chars` are, after "contains 'x' (U+…), ": `a NATS subject wildcard`. */
  readonly what: string;
  readonly tokens: string;
  readonly tokensAlways: boolean;
  readonly tokenWhat: string;
  /** A character allowed alone that the broker reads as structure doubled (Artemis's `::`), and what it is. */
  readonly doubled?: string;
  readonly doubledWhat?: string;
  /** A first character the broker keeps for itself (MQTT's `$SYS/…`): a value may not start the address with it. */
  readonly reservedStart?: { readonly char: string; readonly why: string };
  /** The longest address the broker takes, in UTF-8 bytes, and its word (`a routing key`). */
  readonly maxBytes?: { readonly bytes: number; readonly what: string };
}

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
export function refusedCharacters(syntax: AddressSyntax): string[] {
  const out: string[] = [...syntax.chars];
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
  /** The target's address syntax the rule was built for (its reserved start and longest address). */
  readonly syntax: AddressSyntax;
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
  /** The target splits at its protocol's token separator; default: the syntax's tokensAlways. */
  splitsTokens?: boolean;
  /** `template-value-tokens: true`: a value may hold the token separator (never an empty token). Default false. */
  valuesSpanTokens?: boolean;
}

/** Compiled rules by syntax, then by pattern and token mode: a bridge asks for its rule per message. */
const rules = new WeakMap<AddressSyntax, Map<string, ValueRule>>();

/**
 * The rule of `template-values` `pattern` (default DEFAULT_TEMPLATE_VALUES) on a target of `syntax`. The configuration
 * checked the pattern; one that does not compile here is a programmer error.
 */
export function valueRule(pattern: string = DEFAULT_TEMPLATE_VALUES, syntax: AddressSyntax, options: ValueRuleOptions = {}): ValueRule {
  const separator = (options.splitsTokens ?? syntax.tokensAlways) ? syntax.tokens : '';
  const mode: TokenMode = separator === '' ? 'none' : options.valuesSpanTokens === true ? 'span' : 'refuse';
  const key = `${mode}\u0000${pattern}`;
  let bySyntax = rules.get(syntax);
  if (bySyntax === undefined) {
    bySyntax = new Map();
    rules.set(syntax, bySyntax);
  }
  let rule = bySyntax.get(key);
  if (rule === undefined) {
    rule = buildRule(pattern, syntax, mode);
    bySyntax.set(key, rule);
  }
  return rule;
}

/** none: the target has no token separator; refuse: a value may not hold it; span: it may, between two tokens. */
type TokenMode = 'none' | 'refuse' | 'span';

function buildRule(pattern: string, syntax: AddressSyntax, mode: TokenMode): ValueRule {
  const compiled = compileValuePattern(pattern);
  if (!compiled.ok) throw new TypeError(`template-values '${pattern}' was not checked: ${compiled.error}`);
  const one = compiled.regex;
  const { chars: separators, what, tokens, tokenWhat, doubled = '', doubledWhat = '' } = syntax;
  const fast = pattern === DEFAULT_TEMPLATE_VALUES ? (mode === 'refuse' ? DEFAULT_ONE_TOKEN : DEFAULT_WHOLE) : undefined;
  return {
    syntax,
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
