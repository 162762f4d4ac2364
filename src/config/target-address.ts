/**
 * The address that keys a target's duplicate-ID cache, from a bridge's resolved target: the very functions the
 * endpoints use for their `address` (amqp-address.ts targetAddress, stomp-address.ts stompAddress, mqtt-address.ts
 * mqttTopicAddress: broker from the connection's first URL, then the destination or topic). The start-up in-flight warning groups bridges by it, and the service
 * matches the cache's reports of a lost cache to bridges by it, so both see the bridges that really share a cache,
 * whatever their connections are called.
 */
import { targetAddress } from './amqp-address.js';
import { stompAddress, stompDestination } from './stomp-address.js';
import { natsSubjectAddress } from './nats-address.js';
import { mqttTopicAddress } from './mqtt-address.js';
import { amqp10NodeAddress } from './amqp10-address.js';
import type { BridgeConfig, TargetConfig } from './types.js';
import { parseAddressTemplate, type AddressTemplate, type TemplateRules } from '../routing/address-template.js';
import { ADDRESS_SEPARATORS, valueRule } from '../routing/address-values.js';

export function cacheAddress(target: TargetConfig): string {
  const c = target.connection;
  if (c.type === 'stomp') return stompAddress(c, stompDestination(target.queue ?? ''));
  if (c.type === 'nats') return natsSubjectAddress(c, target.subject ?? '');
  if (c.type === 'mqtt') return mqttTopicAddress(c, target.topic ?? '');
  if (c.type === 'amqp10') return amqp10NodeAddress(c, target.address ?? '');
  return targetAddress(c, target);
}

/**
 * The address template of a bridge's target (its routing key on AMQP — `routing-key`, else the queue through the
 * default exchange —, its STOMP queue or its MQTT topic), when it has references; undefined for a fixed target. The
 * configuration has checked its syntax.
 */
export function targetTemplate(target: TargetConfig): AddressTemplate | undefined {
  const text = target.template;
  if (text === undefined) return undefined;
  const parsed = parseAddressTemplate(text);
  if ('error' in parsed) throw new TypeError(`target address template '${text}' was not checked: ${parsed.error.message}`);
  return parsed.template;
}

/** Where one message goes, for a templated target: what the endpoint is given, and the cache address it is keyed by. */
export interface ResolvedRoute {
  /** AMQP: the routing key (on the target's exchange); STOMP: the destination; NATS: the subject; MQTT: the topic; AMQP 1.0: the node address. */
  route: string;
  /** The duplicate-ID cache's address: exactly cacheAddress() of a fixed target with this routing key or queue. */
  address: string;
}

export function resolvedRoute(target: TargetConfig, resolved: string): ResolvedRoute {
  const c = target.connection;
  if (c.type === 'stomp') {
    const destination = stompDestination(resolved);
    return { route: destination, address: stompAddress(c, destination) };
  }
  if (c.type === 'nats') return { route: resolved, address: natsSubjectAddress(c, resolved) };
  if (c.type === 'mqtt') return { route: resolved, address: mqttTopicAddress(c, resolved) };
  if (c.type === 'amqp10') return { route: resolved, address: amqp10NodeAddress(c, resolved) };
  return { route: resolved, address: targetAddress(c, { exchange: target.exchange, routingKey: resolved }) };
}

/**
 * Whether the target splits its resolved address into tokens at its protocol's token separator (ADDRESS_SEPARATORS
 * `tokens`): always on NATS and STOMP; on AMQP only where the configuration says the exchange is a topic exchange
 * (`exchange-type: topic`, or amq.topic, which every broker declares so) — a direct or the default exchange reads a
 * routing key as one name, and the bridge cannot ask the broker an exchange's type.
 */
export function targetSplitsTokens(target: TargetConfig): boolean {
  const c = target.connection;
  if (c.type !== 'amqp') return ADDRESS_SEPARATORS[c.type].tokensAlways;
  return target.exchangeType === 'topic' || target.exchange === 'amq.topic';
}

/**
 * The value rules of a bridge's templated target (../routing/address-template.ts TemplateRules): its template-values on
 * the target's protocol, the token separator refused where the target splits tokens unless template-value-tokens.
 * A `${property.topic}` read from an MQTT source with `topic-separator: "."` may hold dots: its levels are the topic's
 * own structure (docs/security.md#addresses-built-from-message-data).
 */
export function templateRules(bridge: BridgeConfig): TemplateRules {
  const protocol = bridge.target.connection.type;
  const splitsTokens = targetSplitsTokens(bridge.target);
  const value = valueRule(bridge.templateValues, protocol, { splitsTokens, valuesSpanTokens: bridge.templateValueTokens });
  if (bridge.source.connection.type !== 'mqtt' || bridge.source.topicSeparator !== '.') return { value };
  return { value, topic: valueRule(bridge.templateValues, protocol, { splitsTokens, valuesSpanTokens: true }) };
}
