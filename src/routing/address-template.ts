/**
 * Address templates: a target's routing key (AMQP) or destination (STOMP) computed from the message, e.g.
 * `orders.${header.region:-unknown}`. The configuration accepts them in a bridge's target.routing-key and target.queue
 * (src/config/env.ts leaves their references to this module, src/config/template-checks.ts reports bad ones); the
 * session resolves one per message, and the resolved address keys its duplicate-ID cache (src/core/session/route.ts).
 *
 * Syntax, on purpose the shape of the `${VAR:-default}` environment references of bridges.yaml:
 *   `${header.NAME}`            an application header (AMQP headers table, custom STOMP header)
 *   `${property.NAME}`          a standard property of the neutral message (PROPERTY_NAMES: correlationId, type, …)
 *   `${header.NAME:-fallback}`  the fallback text when the value is missing or empty
 *   `$${`                       a literal `${`
 * A reference always has a namespace and a dot; environment variable names cannot contain one, so the loader can
 * tell the two apart and leave `${header.…}` / `${property.…}` in a template key to this module.
 *
 * Values: strings as they are, numbers, bigints and booleans as text; anything else (null, bytes, tables, arrays) and
 * the empty string count as missing. A reference that is missing and has no fallback leaves the address unresolved:
 * the message is to be dead-lettered with the reason, never sent to a partial address and never lost. A value from
 * the message that could steer the message elsewhere is refused by the one value rule of ./address-values.ts (only
 * `template-values` characters, never a separator of the target's protocol, at most 255 bytes), and so is an AMQP
 * routing key over 255 bytes.
 */
import { valueRule, type AddressSyntax, type ValueRule } from './address-values.js';

export const TEMPLATE_NAMESPACES = ['header', 'property'] as const;
export type TemplateNamespace = (typeof TEMPLATE_NAMESPACES)[number];

/** The neutral message's properties a template may read (src/core/message.ts MessageProperties). */
export const PROPERTY_NAMES: ReadonlySet<string> = new Set([
  'contentType',
  'contentEncoding',
  'correlationId',
  'replyTo',
  'messageId',
  'type',
  'userId',
  'appId',
  'priority',
  // The MQTT topic a message was published to (an MQTT source: ../mapping/mqtt-mapping.ts); absent elsewhere.
  'topic',
]);

export interface TemplateReference {
  namespace: TemplateNamespace;
  name: string;
  fallback?: string;
  /** As written, for messages: `${header.region:-unknown}`. */
  text: string;
}

export type TemplatePart = string | TemplateReference;

export interface AddressTemplate {
  readonly source: string;
  readonly parts: readonly TemplatePart[];
}

/** A problem in a template; `index` is where in the template text it starts (for the column of a config error). */
export interface TemplateSyntaxError {
  index: number;
  message: string;
}

const NAME = /^[A-Za-z0-9_.-]+$/;

/** Parses a template; a text without `${` is a template with one literal part. */
export function parseAddressTemplate(source: string): { template: AddressTemplate } | { error: TemplateSyntaxError } {
  const parts: TemplatePart[] = [];
  let literal = '';
  let i = 0;
  while (i < source.length) {
    if (source.startsWith('$${', i)) {
      literal += '${';
      i += 3;
      continue;
    }
    if (!source.startsWith('${', i)) {
      literal += source[i];
      i += 1;
      continue;
    }
    const close = source.indexOf('}', i + 2);
    if (close < 0) {
      return { error: { index: i, message: 'unclosed ${ (expected ${header.NAME}, ${property.NAME} or ${header.NAME:-fallback}; write $${ for a literal ${)' } };
    }
    const text = source.slice(i, close + 1);
    const inner = source.slice(i + 2, close);
    const sep = inner.indexOf(':-');
    const ref = sep < 0 ? inner : inner.slice(0, sep);
    const dot = ref.indexOf('.');
    const namespace = dot < 0 ? ref : ref.slice(0, dot);
    const name = dot < 0 ? '' : ref.slice(dot + 1);
    if (!(TEMPLATE_NAMESPACES as readonly string[]).includes(namespace)) {
      return { error: { index: i, message: `unknown namespace '${namespace}' in ${text} (expected header.NAME or property.NAME)` } };
    }
    if (!NAME.test(name)) {
      return { error: { index: i, message: `${text} names no ${namespace} (expected ${namespace}.NAME: letters, digits, '.', '_' or '-')` } };
    }
    if (namespace === 'property' && !PROPERTY_NAMES.has(name)) {
      return { error: { index: i, message: `unknown property '${name}' in ${text} (expected one of ${[...PROPERTY_NAMES].join(', ')})` } };
    }
    if (literal !== '') parts.push(literal);
    literal = '';
    const reference: TemplateReference = { namespace: namespace as TemplateNamespace, name, text };
    if (sep >= 0) reference.fallback = inner.slice(sep + 2);
    parts.push(reference);
    i = close + 1;
  }
  if (literal !== '') parts.push(literal);
  return { template: { source, parts } };
}

export function isTemplated(template: AddressTemplate): boolean {
  return template.parts.some((p) => typeof p !== 'string');
}

/** What a template resolves over: the neutral message, read by its shape. */
export interface TemplateInput {
  headers: Readonly<Record<string, unknown>>;
  properties: object;
}

export type Resolved =
  | { ok: true; value: string }
  /** A reference is missing and has no fallback, or the address is empty: dead-lettered as `unresolved-address`. */
  | { ok: false; kind: 'unresolved'; reason: string }
  /** A value from the message that the value rule refuses (./address-values.ts): dead-lettered as `unsafe-address`. */
  | { ok: false; kind: 'unsafe'; reason: string; value: string };

function valueText(v: unknown): string | undefined {
  if (typeof v === 'string') return v === '' ? undefined : v;
  if (typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean') return String(v);
  return undefined;
}

/**
 * The rules a template's values pass: `value` for every reference, `topic` instead for `${property.topic}` when the
 * source reads MQTT topic levels as tokens (`topic-separator: "."`: the dots are the topic's own structure, not a
 * publisher's choice within one level). src/config/target-address.ts templateRules builds them for a bridge.
 */
export interface TemplateRules {
  value: ValueRule;
  topic?: ValueRule;
}

/**
 * The address for one message, or why there is none. Every value taken from the message must pass its rule (the
 * bridge's `template-values` on the target's protocol, ./address-values.ts); a fallback is the configuration's text and
 * is used as written. The detail never quotes the value: it may hold anything, and the dead-letter carries it encoded.
 */
export function resolveAddress(
  template: AddressTemplate,
  message: TemplateInput,
  syntax: AddressSyntax,
  rules: ValueRule | TemplateRules = valueRule(undefined, syntax),
): Resolved {
  const { value: rule, topic: topicRule = rule } = 'refuse' in rules ? { value: rules } : rules;
  let out = '';
  for (const part of template.parts) {
    if (typeof part === 'string') {
      out += part;
      continue;
    }
    // Own keys only: a header named `constructor` that the message lacks is missing, not Object's constructor.
    const from = part.namespace === 'header' ? message.headers : (message.properties as Record<string, unknown>);
    const raw = Object.hasOwn(from, part.name) ? from[part.name] : undefined;
    const fromMessage = valueText(raw);
    if (fromMessage !== undefined) {
      const refused = (part.namespace === 'property' && part.name === 'topic' ? topicRule : rule).refuse(fromMessage);
      if (refused !== undefined) return { ok: false, kind: 'unsafe', reason: `the value of ${part.text} ${refused}`, value: fromMessage };
      // An address that starts with a reserved character is the broker's own (MQTT's $SYS/…): a value may not make one.
      const reserved = syntax.reservedStart;
      if (reserved !== undefined && out === '' && fromMessage.startsWith(reserved.char)) {
        return { ok: false, kind: 'unsafe', reason: `the value of ${part.text} starts the ${reserved.why}`, value: fromMessage };
      }
      out += fromMessage;
      continue;
    }
    if (part.fallback === undefined) {
      return { ok: false, kind: 'unresolved', reason: `${part.namespace} '${part.name}' is missing or empty and ${part.text} has no fallback` };
    }
    out += part.fallback;
  }
  if (out === '') return { ok: false, kind: 'unresolved', reason: `${template.source} resolves to an empty address` };
  const max = syntax.maxBytes;
  if (max !== undefined && Buffer.byteLength(out, 'utf8') > max.bytes) {
    return { ok: false, kind: 'unsafe', reason: `${template.source} resolves to ${max.what} over ${max.bytes.toLocaleString('en-US')} bytes`, value: out };
  }
  return { ok: true, value: out };
}
