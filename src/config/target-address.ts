/**
 * The address that keys a target's duplicate-ID cache, from a bridge's resolved target, as its protocol's record
 * (./protocols/) computes it with the very functions the endpoints use for their `address` (amqp-address.ts
 * targetAddress, stomp-address.ts stompAddress, mqtt-address.ts mqttTopicAddress: broker from the connection's first
 * URL, then the destination or topic). The start-up in-flight warning groups bridges by it, and the service
 * matches the cache's reports of a lost cache to bridges by it, so both see the bridges that really share a cache,
 * whatever their connections are called.
 */
import type { BridgeConfig, TargetConfig } from './types.js';
import { parseAddressTemplate, type AddressTemplate, type TemplateRules } from '../routing/address-template.js';
import { valueRule } from '../routing/address-values.js';
import type { ResolvedRoute } from './protocol.js';
import { configProtocolOf } from './protocols.js';

export function cacheAddress(target: TargetConfig): string {
  return configProtocolOf(target.connection.type).cacheAddress(target);
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

export function resolvedRoute(target: TargetConfig, resolved: string): ResolvedRoute {
  return configProtocolOf(target.connection.type).resolvedRoute(target, resolved);
}

/**
 * Whether the target splits its resolved address into tokens at its protocol's token separator (its addressSyntax
 * `tokens`): always on NATS and STOMP; on AMQP only where the configuration says the exchange is a topic exchange
 * (`exchange-type: topic`, or amq.topic, which every broker declares so) — a direct or the default exchange reads a
 * routing key as one name, and the bridge cannot ask the broker an exchange's type.
 */
export function targetSplitsTokens(target: TargetConfig): boolean {
  const protocol = configProtocolOf(target.connection.type);
  return protocol.splitsTokens?.(target) ?? protocol.addressSyntax.tokensAlways;
}

/**
 * The value rules of a bridge's templated target (../routing/address-template.ts TemplateRules): its template-values on
 * the target's protocol, the token separator refused where the target splits tokens unless template-value-tokens.
 * A `${property.topic}` read from an MQTT source with `topic-separator: "."` may hold dots: its levels are the topic's
 * own structure (docs/security.md#addresses-built-from-message-data).
 */
export function templateRules(bridge: BridgeConfig): TemplateRules {
  const syntax = configProtocolOf(bridge.target.connection.type).addressSyntax;
  const splitsTokens = targetSplitsTokens(bridge.target);
  const value = valueRule(bridge.templateValues, syntax, { splitsTokens, valuesSpanTokens: bridge.templateValueTokens });
  if (configProtocolOf(bridge.source.connection.type).topicSpansTokens?.(bridge.source) !== true) return { value };
  return { value, topic: valueRule(bridge.templateValues, syntax, { splitsTokens, valuesSpanTokens: true }) };
}
