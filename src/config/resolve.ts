/**
 * From the validated file (kebab-case, as written) to the Config the code consumes (camelCase, every default
 * applied, connections embedded). Bridge settings are layered: schema default < `defaults:` < the bridge itself.
 * Nothing here mutates its input; every object in the result is new (connection objects are shared between the
 * endpoints that use the same connection, which lets the core tell them apart by identity).
 */
import { isTemplated, parseAddressTemplate } from '../routing/address-template.js';
import { hasHeaderRules, type HeaderRules } from '../routing/header-rules.js';
import { compileSelector } from '../routing/selector.js';
import { camelKeys } from './camel-keys.js';
import type { BridgeConfig, Config, ConnectionConfig, RedisTopology, SourceConfig, TargetConfig } from './types.js';
import {
  bridgeSettingDefaults,
  DEFAULT_REDIS_URL,
  type BridgeSettingValues,
  type ConfigFile,
  type ConfigFileBridge,
  type ConfigFileConnection,
  type ConfigFileTarget,
} from './schema.js';
import { urlWithPassword, type ConfigFiles } from './files.js';
import type { ConnectionFiles } from './referenced-file.js';
import type { Role } from './protocol.js';
import { configProtocolOf } from './protocols.js';

/** The bridge settings a layer sets, and only those, so that spreading it over a lower layer never writes `undefined`. */
const SETTING_KEYS = new Set(Object.keys(bridgeSettingDefaults));

function settingsSetIn(layer: Partial<BridgeSettingValues> | undefined): Partial<BridgeSettingValues> {
  if (layer === undefined) return {};
  return Object.fromEntries(
    Object.entries(layer).filter(([k, v]) => SETTING_KEYS.has(k) && v !== undefined),
  );
}

function resolveConnection(name: string, c: ConfigFileConnection, files: ConnectionFiles): ConnectionConfig {
  // The cross-checks guarantee exactly one of url / urls.
  const given = c.urls !== undefined ? [...c.urls] : c.url !== undefined ? [c.url] : [];
  // The password from password-file goes into the URLs, where the clients (and every redaction) expect credentials.
  const resolved = {
    name,
    urls: given.map((u) => encodedUserInfo(urlWithPassword(u, files.password))),
    ...(files.tls !== undefined ? { tls: files.tls } : {}),
  };
  return configProtocolOf(c.type).resolveConnection(c, resolved, files);
}

function lookup(connections: Record<string, ConnectionConfig>, name: string): ConnectionConfig {
  const c = connections[name];
  // Unreachable after the cross-checks; a programmer error if it happens.
  if (c === undefined) throw new TypeError(`connection '${name}' was not resolved`);
  return c;
}

function resolveTarget(connections: Record<string, ConnectionConfig>, t: ConfigFileTarget, bridge: string, role: Role): TargetConfig {
  const connection = lookup(connections, t.connection);
  const protocol = configProtocolOf(connection.type);
  const target: TargetConfig = { ...camelKeys(t, ['connection']), connection, ...protocol.targetDefaults?.(t, connection, bridge, role) };
  // A target's routing-key, queue, subject and topic reach here as templates (./env.ts leaves `$${` to them): one
  // without a reference is its literal text, `$${` unescaped, so that a fixed address means what it did before templates.
  if (role === 'target') {
    const text = protocol.templateText(target);
    const parsed = text === undefined ? undefined : parseAddressTemplate(text);
    if (parsed !== undefined && !('error' in parsed) && isTemplated(parsed.template)) target.template = parsed.template.source;
    if (target.routingKey !== undefined) target.routingKey = literalOf(target.routingKey);
    if (target.queue !== undefined) target.queue = literalOf(target.queue);
    if (target.subject !== undefined) target.subject = literalOf(target.subject);
    if (target.topic !== undefined) target.topic = literalOf(target.topic);
    if (target.address !== undefined) target.address = literalOf(target.address);
  }
  return target;
}

function resolveSource(connections: Record<string, ConnectionConfig>, b: ConfigFileBridge): SourceConfig {
  const connection = lookup(connections, b.source.connection);
  return configProtocolOf(connection.type).resolveSource(b.source, connection, b.name);
}

/** A fixed address as its literal text (`$${` unescaped); a template stays as written. */
function literalOf(text: string): string {
  const parsed = parseAddressTemplate(text);
  if ('error' in parsed || isTemplated(parsed.template)) return text;
  return parsed.template.parts.map((p) => (typeof p === 'string' ? p : p.text)).join('');
}

function resolveBridge(
  connections: Record<string, ConnectionConfig>,
  defaults: ConfigFile['defaults'],
  b: ConfigFileBridge,
): BridgeConfig {
  const settings: BridgeSettingValues = {
    ...bridgeSettingDefaults,
    ...settingsSetIn(defaults),
    ...settingsSetIn(b),
  };
  return {
    name: b.name,
    state: b.state,
    source: resolveSource(connections, b),
    target: resolveTarget(connections, b.target, b.name, 'target'),
    ...(b['dead-letter'] !== undefined ? { deadLetter: resolveTarget(connections, b['dead-letter'], b.name, 'dead-letter') } : {}),
    ...headerRulesOf(b),
    // The cross-checks compiled it already and reported a bad one: this cannot throw for a file that got here.
    ...(b.filter !== undefined ? { filter: compileSelector(b.filter) } : {}),
    ...camelKeys(settings),
  };
}

/** The bridge's header rules, in the file's order; nothing when it has none. */
function headerRulesOf(b: ConfigFileBridge): { headerRules?: HeaderRules } {
  const rules: HeaderRules = {
    rename: Object.entries(b['rename-headers'] ?? {}),
    remove: [...(b['remove-headers'] ?? [])],
    set: Object.entries(b['set-headers'] ?? {}),
  };
  return hasHeaderRules(rules) ? { headerRules: rules } : {};
}

/** The one Redis topology given (the cross-checks reject two), or the default standalone Redis. */
function redisTopology(ic: ConfigFile['id-cache']): RedisTopology {
  if (ic['redis-cluster'] !== undefined) return { kind: 'cluster', urls: ic['redis-cluster'].map(encodedUserInfo) };
  const sentinel = ic['redis-sentinel'];
  if (sentinel !== undefined) return { kind: 'sentinel', ...sentinel, urls: sentinel.urls.map(encodedUserInfo) };
  return { kind: 'standalone', url: encodedUserInfo(ic['redis-url'] ?? DEFAULT_REDIS_URL) };
}

/**
 * A URL with user info as the WHATWG parser reads it (every client here parses URLs so): the user and password
 * percent-encoded, so that a password holding `@`, a space or a quote is one unambiguous piece of the URL wherever a
 * library quotes it back, and redaction (src/shared/errors.ts redactUrl) finds all of it. The same URL for the client.
 */
function encodedUserInfo(url: string): string {
  if (!url.includes('@') || !URL.canParse(url)) return url;
  const u = new URL(url);
  if (u.username === '' && u.password === '') return url;
  // The parser leaves `'` raw in user info; a quoted URL in a message would end the redaction there (encodeUserInfo).
  u.username = u.username.replaceAll("'", '%27');
  u.password = u.password.replaceAll("'", '%27');
  return u.href;
}

/** Builds the Config from a file that passed the schema and the cross-checks, and the files it names (./files.ts). */
export function resolveConfig(file: ConfigFile, absolutePath: string, files: ConfigFiles): Config {
  const connections: Record<string, ConnectionConfig> = {};
  for (const [name, c] of Object.entries(file.connections)) connections[name] = resolveConnection(name, c, files.connections[name] ?? {});
  const ic = file['id-cache'];
  const config: Config = {
    file: absolutePath,
    ...camelKeys(file, ['connections', 'id-cache', 'defaults', 'bridges']),
    connections,
    idCache: {
      ...camelKeys(ic, ['redis-url', 'redis-cluster', 'redis-sentinel', 'password-file', 'tls']),
      redis: redisTopology(ic),
      ...files.idCache,
    },
    bridges: file.bridges.map((b) => resolveBridge(connections, file.defaults, b)),
    deprecations: [],
  };
  const httpPort = file['http-port'] ?? file['metrics-port'];
  if (httpPort !== undefined) config.httpPort = httpPort;
  return config;
}
