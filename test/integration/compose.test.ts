/**
 * The deployment files agree with each other and with the code: docker-compose.yml, Dockerfile, .dockerignore and
 * the bridges.yaml that compose mounts. No Docker engine is needed (none exists on CI): the files are parsed, and
 * bridges.yaml is loaded with the environment the compose file gives the bridge container.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config/load.js';
import { text } from '../support/text.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const read = (name: string): string => readFileSync(join(root, name), 'utf8');

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function obj(v: unknown, what: string): Obj {
  if (!isObj(v)) throw new Error(`${what} is not a mapping`);
  return v;
}

function strings(v: unknown): string[] {
  if (typeof v === 'string') return [v];
  return Array.isArray(v) ? v.map(String) : [];
}

/** compose `environment` is either a mapping or a list of KEY=VALUE. */
function envOf(service: Obj): Record<string, string> {
  const env = service.environment;
  if (Array.isArray(env)) {
    return Object.fromEntries(
      env.map(String).map((entry) => {
        const i = entry.indexOf('=');
        return i < 0 ? [entry, ''] : [entry.slice(0, i), entry.slice(i + 1)];
      }),
    );
  }
  return Object.fromEntries(Object.entries(obj(env ?? {}, 'environment')).map(([k, v]) => [k, String(v)]));
}

/** compose durations as used here: 30s, 1m30s, 500ms. */
function durationMs(text: unknown): number {
  const s = String(text);
  const parts = [...s.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  expect(parts.map((p) => p[0]).join(''), `duration '${s}'`).toBe(s);
  const unit: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  return parts.reduce((sum, p) => sum + Number(p[1]) * (unit[p[2] ?? 's'] ?? 0), 0);
}

/** Container-side port of each `ports` entry ("127.0.0.1:5672:5672", "5672:5672", "5672", or long syntax). */
function containerPorts(service: Obj): number[] {
  const ports = Array.isArray(service.ports) ? service.ports : [];
  const published = ports.map((p) => {
    if (isObj(p)) return Number(p.target);
    const last = String(p).split('/')[0]?.split(':').pop();
    return Number(last);
  });
  // Ports other compose services reach without a publication (Mosquitto's bridge listener).
  return [...published, ...strings(service.expose).map(Number)];
}

function urlOf(text: string): URL {
  return new URL(text);
}

const compose = obj(parse(read('docker-compose.yml')), 'docker-compose.yml');
const services = obj(compose.services, 'services');
const service = (name: string): Obj => obj(services[name], `service ${name}`);
const bridge = service('bridge');
const bridgeEnv = envOf(bridge);

/** Instruction arguments of the last stage's ENTRYPOINT/CMD/USER, exec form parsed as JSON. */
function dockerfileInstruction(text: string, name: string): string | undefined {
  const lines = text.split('\n').filter((l) => new RegExp(`^\\s*${name}\\s`, 'i').test(l));
  return lines.at(-1)?.trim().slice(name.length).trim();
}

describe('docker-compose.yml', () => {
  it('has the brokers, Redis and the bridge, and Prometheus and Grafana only in the monitoring profile', () => {
    const inProfile = (name: string) => strings(service(name).profiles);
    expect(Object.keys(services).filter((n) => inProfile(n).length === 0).sort()).toEqual(['activemq', 'bridge', 'mosquitto', 'nats', 'rabbitmq', 'redis', 'secrets']);
    expect(Object.keys(services).filter((n) => inProfile(n).includes('monitoring')).sort()).toEqual(['grafana', 'prometheus']);
  });

  it('runs the broker versions the bridge is tested against', () => {
    expect(service('rabbitmq').image).toMatch(/^rabbitmq:3\.13-management/);
    expect(service('activemq').image).toMatch(/^apache\/activemq-classic:5\.18\./);
    expect(service('redis').image).toMatch(/^redis:7/);
    expect(service('mosquitto').image).toMatch(/^eclipse-mosquitto:2/);
  });

  it('gives every backing service a healthcheck that checks the service itself', () => {
    const test = (name: string): string => strings(obj(service(name).healthcheck, `${name}.healthcheck`).test).join(' ');
    // RabbitMQ: its AMQP port accepts connections (`ping` answers while the listeners are still down).
    expect(test('rabbitmq')).toMatch(/rabbitmq-diagnostics -q check_port_connectivity/);
    expect(test('redis')).toMatch(/redis-cli.*ping/);
    // ActiveMQ: the STOMP port the bridge uses, not the web console or OpenWire.
    expect(test('activemq')).toContain('61613');
    // Mosquitto: a subscriber on the MQTT port gets a message ($$ is compose's $).
    // Mosquitto: a subscriber on the bridge's listener, with the bridge's password, gets a message.
    expect(test('mosquitto')).toMatch(/mosquitto_sub .*-p 1884 -u bridge -P "\$\$\(cat \/run\/secrets\/mqtt-bridge-password\)" .*\$\$SYS\/broker\/uptime/);
  });

  it('runs Mosquitto with persistence on a named volume and no limit on what an offline session queues', () => {
    const m = service('mosquitto');
    const mounts = strings(m.volumes).map((v) => v.split(':'));
    const conf = read(mounts.find((v) => v[1] === '/mosquitto/config/mosquitto.conf')![0]!.replace(/^\.\//, ''));
    expect(conf).toMatch(/^persistence true$/m);
    expect(conf).toMatch(/^persistence_location \/mosquitto\/data\/$/m);
    expect(conf).toMatch(/^max_queued_messages 0$/m);
    expect(conf).toMatch(/^listener 1883 /m);
    const data = mounts.find((v) => v[1] === '/mosquitto/data');
    expect(Object.keys(obj(compose.volumes, 'volumes'))).toContain(data?.[0]);
  });

  it('runs NATS with JetStream, its store on a named volume, healthy only once JetStream answers', () => {
    const nats = service('nats');
    expect(nats.image).toMatch(/^nats:2\./);
    const command = strings(nats.command);
    expect(command).toContain('-js');
    const store = command[command.indexOf('-sd') + 1];
    const volume = strings(nats.volumes).find((v) => v.split(':')[1] === store);
    expect(volume, `a named volume at the store (${store})`).toBeDefined();
    expect(Object.keys(obj(compose.volumes, 'volumes'))).toContain(volume?.split(':')[0]);
    expect(strings(obj(nats.healthcheck, 'nats.healthcheck').test).join(' ')).toMatch(/healthz\?js-enabled-only=true/);
    expect(strings(nats.ports)).toEqual(['127.0.0.1:${NATS_HOST_PORT:-4222}:4222']);
  });

  it('persists Redis (append-only file on a named volume)', () => {
    const redis = service('redis');
    const command = strings(redis.command).join(' ');
    expect(command).toMatch(/--appendonly\s+yes/);
    const dataVolume = strings(redis.volumes).find((v) => v.split(':')[1] === '/data');
    expect(dataVolume, 'a volume mounted at /data').toBeDefined();
    const volumeName = dataVolume?.split(':')[0] ?? '';
    expect(Object.keys(obj(compose.volumes, 'volumes'))).toContain(volumeName);
  });

  it('keeps broker data on named volumes', () => {
    const declared = Object.keys(obj(compose.volumes, 'volumes'));
    for (const name of ['rabbitmq', 'activemq', 'mosquitto', 'redis']) {
      const named = strings(service(name).volumes).map((v) => v.split(':')[0]);
      expect(named.some((v) => declared.includes(v ?? '')), `${name} has a named volume`).toBe(true);
    }
  });

  it('builds the bridge from the Dockerfile and starts it only after the backing services are healthy', () => {
    const build = bridge.build;
    const context = typeof build === 'string' ? build : String(obj(build, 'bridge.build').context);
    const dockerfile = isObj(build) && build.dockerfile !== undefined ? text(build.dockerfile) : 'Dockerfile';
    expect(existsSync(join(root, context, dockerfile)), `${context}/${dockerfile} exists`).toBe(true);
    expect(join(root, context, dockerfile)).toBe(join(root, 'Dockerfile'));

    const dependsOn = obj(bridge.depends_on, 'bridge.depends_on');
    for (const name of ['rabbitmq', 'activemq', 'mosquitto', 'redis']) {
      expect(obj(dependsOn[name], `depends_on.${name}`).condition, name).toBe('service_healthy');
    }
    expect(bridge.restart).toBe('unless-stopped');
  });

  it('points the bridge at the compose services on their standard ports', () => {
    const expected = [
      ['AMQP_URL', 'amqp:', 'rabbitmq', 5672],
      ['STOMP_URL', 'stomp:', 'activemq', 61613],
      ['MQTT_URL', 'mqtt:', 'mosquitto', 1884],
      ['REDIS_URL', 'redis:', 'redis', 6379],
    ] as const;
    for (const [name, protocol, host, port] of expected) {
      const value = bridgeEnv[name];
      expect(value, name).toBeDefined();
      const url = urlOf(value ?? '');
      expect(url.protocol, name).toBe(protocol);
      expect(url.hostname, name).toBe(host);
      expect(Number(url.port), name).toBe(port);
      // The port the URL uses is the one the service's container listens on (and publishes).
      expect(containerPorts(service(host)), `${host} ports`).toContain(port);
    }
  });

  it('mounts the folder of bridges.yaml read-only where the image looks for it (a reload sees a replaced file)', () => {
    // A single-file bind mount keeps the file an editor replaced (rename over it): the folder is mounted instead.
    expect(strings(bridge.volumes).filter((v) => v.split(':')[1]?.startsWith('/etc/broker-bridge'))).toEqual(['.:/etc/broker-bridge:ro']);
    expect(existsSync(join(root, 'bridges.yaml'))).toBe(true);
  });

  it('runs the bridge under an init process, so that a signal in its first milliseconds is not lost', () => {
    expect(bridge.init).toBe(true);
  });

  it('commits no credential that works: the admin token and the Mosquitto passwords are made per deployment, on a volume only Mosquitto and the bridge mount', () => {
    const init = service('secrets');
    expect(strings(init.entrypoint)).toEqual(['sh', '/init-secrets.sh', '/secrets']);
    expect(strings(init.volumes)).toEqual(['./docker/secrets/init-secrets.sh:/init-secrets.sh:ro', 'secrets:/secrets']);
    expect(compose.secrets, 'no compose secrets: files a clone would share').toBeUndefined();
    const mounting = Object.entries(services).filter(([, s]) => strings(obj(s, 'service').volumes).some((v) => v.startsWith('secrets:'))).map(([n]) => n);
    expect(mounting.sort()).toEqual(['bridge', 'mosquitto', 'secrets']);
    expect(strings(bridge.volumes)).toContain('secrets:/run/secrets:ro');
    expect(bridgeEnv.ADMIN_TOKEN_FILE).toBe('/run/secrets/admin-token');
    for (const name of ['bridge', 'mosquitto']) {
      expect(obj(obj(service(name).depends_on, `${name}.depends_on`).secrets, `${name} waits for the secrets`).condition).toBe('service_completed_successfully');
    }
    // The bridge's MQTT URL names the user; its password comes from the volume, put in by the entrypoint.
    expect(bridgeEnv.MQTT_URL).toBe('mqtt://bridge@mosquitto:1884');
    expect(strings(bridge.entrypoint).join(' ')).toContain('MQTT_URL="mqtt://bridge:$$(cat /run/secrets/mqtt-bridge-password)@mosquitto:1884" exec node dist/cli.js');
    // Nothing under docker/secrets but the script that makes them.
    expect(readdirSync(join(root, 'docker/secrets'))).toEqual(['init-secrets.sh']);
  });

  it('publishes every port on 127.0.0.1 through a variable, for a host where it is taken; the README names them', () => {
    const readme = read('README.md');
    const published = Object.entries(services).flatMap(([name, s]) => strings(obj(s, name).ports).map((p) => [name, p] as const));
    expect(published.length).toBeGreaterThan(0);
    for (const [name, p] of published) {
      const m = /^127\.0\.0\.1:\$\{([A-Z_]+_HOST_PORT):-(\d+)\}:(\d+)$/.exec(p);
      expect(m, `${name}: ${p} is 127.0.0.1:\${X_HOST_PORT:-N}:N`).not.toBeNull();
      expect(readme, `README names ${m![1]}`).toContain(m![1]);
    }
  });

  it('has no top-level name: (Debian\'s docker-compose 1.29, which CI validates the file with, rejects it)', () => {
    expect(Object.keys(compose)).not.toContain('name');
    expect(read('README.md')).toContain('docker compose up --build');
  });
});

describe('Dockerfile and .dockerignore', () => {
  const dockerfile = read('Dockerfile');

  it('runs the built CLI with the mounted configuration, as a non-root user', () => {
    expect(JSON.parse(dockerfileInstruction(dockerfile, 'ENTRYPOINT') ?? 'null')).toEqual(['node', 'dist/cli.js']);
    expect(JSON.parse(dockerfileInstruction(dockerfile, 'CMD') ?? 'null')).toEqual([
      'run',
      '--config',
      '/etc/broker-bridge/bridges.yaml',
    ]);
    expect(dockerfileInstruction(dockerfile, 'USER')).toBe('node');
    // The bin the image runs is the package's bin.
    const pkg = JSON.parse(read('package.json')) as { bin?: Record<string, string> };
    expect(pkg.bin?.['broker-bridge']).toBe('dist/cli.js');
  });

  it('builds on a supported Node LTS line with the lock file and the build script', () => {
    // Node 20 reached its end of life on 2026-04-30; 22 and 24 are LTS lines.
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:(22|24)-bookworm-slim$/m);
    expect(dockerfile).toMatch(/npm ci\b/);
    expect(dockerfile).toMatch(/npm run build\b/);
    expect(dockerfile).toMatch(/npm prune --omit=dev/);
    // `npm run build` runs scripts/copy-assets.mjs, which copies src/cache/scripts/*.lua into dist/.
    expect(dockerfile).toMatch(/^COPY scripts /m);
    // amqplib's guarded header-table decoder (patches/README.md): `npm ci --ignore-scripts` skips postinstall, so the
    // image applies the patch itself, after the install and before the prune (which keeps the patched files).
    expect(dockerfile).toMatch(/^COPY patches /m);
    const flat = dockerfile.replace(/\\\n\s*/g, ' ');
    expect(flat).toMatch(/npm ci --ignore-scripts[^\n]*&& npx --no-install patch-package --error-on-fail/);
    expect(flat.indexOf('npx --no-install patch-package')).toBeLessThan(flat.indexOf('npm prune --omit=dev'));
  });

  it('has a HEALTHCHECK on /livez of the HTTP port it exposes, and listens on every interface', () => {
    const healthcheck = /^HEALTHCHECK\s[\s\S]*?CMD\s+(\[.*\])$/m.exec(dockerfile.replace(/\\\n\s*/g, ' '));
    expect(healthcheck, 'a HEALTHCHECK ... CMD [exec form]').not.toBeNull();
    const cmd = (JSON.parse(healthcheck![1]!) as string[]).join(' ');
    expect(cmd).toMatch(/\/livez/);
    expect(cmd).toContain('9464');
    expect(dockerfileInstruction(dockerfile, 'EXPOSE')).toBe('9464');
    expect(dockerfile).toMatch(/^ENV HTTP_HOST=0\.0\.0\.0$/m);
  });

  it('keeps host build output and state out of the build context, but not what the build needs', () => {
    const ignored = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    for (const name of ['node_modules', 'dist', '.git', '.activemq']) expect(ignored, name).toContain(name);
    for (const needed of ['src', 'scripts', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json']) {
      expect(ignored, needed).not.toContain(needed);
      expect(existsSync(join(root, needed)), `${needed} exists`).toBe(true);
    }
  });
});

const bridgesYaml = join(root, 'bridges.yaml');

describe.skipIf(!existsSync(bridgesYaml))('bridges.yaml as the compose bridge sees it', () => {
  // Only the container's environment: the test runner's own AMQP_URL etc. must not leak in.
  const load = () => loadConfig(bridgesYaml, { ...bridgeEnv });

  it('loads, and every connection points at a compose service', async () => {
    const config = load();
    const hosts = new Map<string, string[]>();
    for (const c of Object.values(config.connections)) {
      hosts.set(c.type, [...(hosts.get(c.type) ?? []), ...c.urls.map((u) => urlOf(u).host)]);
    }
    expect(hosts.get('amqp')?.length, 'an AMQP connection').toBeGreaterThan(0);
    expect(hosts.get('stomp')?.length, 'a STOMP connection').toBeGreaterThan(0);
    for (const h of hosts.get('amqp') ?? []) expect(h).toBe('rabbitmq:5672');
    for (const h of hosts.get('stomp') ?? []) expect(h).toBe('activemq:61613');
    if (config.idCache.persistIdCache) {
      expect(config.idCache.redis.kind).toBe('standalone');
      if (config.idCache.redis.kind === 'standalone') expect(urlOf(config.idCache.redis.url).host).toBe('redis:6379');
    }
  });

  it('serves /readyz on the port the compose healthcheck probes, on every interface of the container', async () => {
    const probe = strings(obj(bridge.healthcheck, 'bridge.healthcheck').test).join(' ');
    const port = /127\.0\.0\.1:(\d+)\/readyz/.exec(probe)?.[1];
    expect(port, 'the healthcheck fetches http://127.0.0.1:<port>/readyz').toBeDefined();
    const config = load();
    expect(config.httpPort, 'http-port in bridges.yaml (without it the bridge never turns healthy)').toBe(Number(port));
    expect(config.httpHost).toBe('0.0.0.0');
    expect(config.deprecations).toEqual([]);
    expect(strings(bridge.expose)).toContain(String(config.httpPort));
  });

  it('monitoring profile: Prometheus scrapes the bridge, Grafana has the data source and the dashboard provisioned', async () => {
    const config = load();
    const mountOf = (svc: Obj, target: string) => strings(svc.volumes).map((v) => v.split(':')).find((m) => m[1] === target)?.[0]?.replace(/^\.\//, '');

    const prometheus = service('prometheus');
    const promFile = mountOf(prometheus, '/etc/prometheus/prometheus.yml');
    expect(promFile, 'prometheus.yml mounted').toBeDefined();
    expect(strings(prometheus.command).join(' ')).toContain('--config.file=/etc/prometheus/prometheus.yml');
    const prom = obj(parse(read(promFile!)), 'prometheus.yml');
    const jobs = (prom.scrape_configs as Obj[]).map((j) => obj(j, 'scrape config'));
    const targets = jobs.flatMap((j) => (j.static_configs as Obj[]).flatMap((sc) => strings(sc.targets)));
    expect(targets).toContain(`bridge:${config.httpPort}`);
    expect(jobs.every((j) => (j.metrics_path ?? '/metrics') === '/metrics')).toBe(true);

    const grafana = service('grafana');
    const provisioning = mountOf(grafana, '/etc/grafana/provisioning');
    expect(provisioning, 'provisioning mounted').toBe('docker/grafana/provisioning');
    const datasource = obj(parse(read(`${provisioning}/datasources/prometheus.yml`)), 'datasource');
    const sources = (datasource.datasources as Obj[]).map((d) => obj(d, 'datasource'));
    expect(sources).toEqual([expect.objectContaining({ type: 'prometheus', uid: 'prometheus', url: 'http://prometheus:9090' })]);
    const providers = (obj(parse(read(`${provisioning}/dashboards/broker-bridge.yml`)), 'provider').providers as Obj[]).map((p) => obj(p, 'provider'));
    const providerPath = String(obj(providers[0]!.options, 'options').path);
    const dashboards = mountOf(grafana, providerPath);
    expect(dashboards, `a dashboards folder mounted at ${providerPath}`).toBe('docker/grafana/dashboards');
    const dashboard = JSON.parse(read(`${dashboards}/broker-bridge.json`)) as { uid: string; panels: { title: string; datasource: { uid: string }; targets: { expr: string }[] }[] };
    expect(dashboard.uid).toBe('broker-bridge');
    expect(dashboard.panels.length).toBeGreaterThan(5);
    for (const p of dashboard.panels) {
      expect(p.datasource.uid, p.title).toBe('prometheus');
      expect(p.targets.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets) expect(t.expr, p.title).toMatch(/\b(bridge|process|nodejs)_[a-z_]+/);
    }
  });

  it('has RabbitMQ declare at boot every AMQP queue the bridges read from or write to (the bridge declares none)', async () => {
    const config = load();
    const rabbit = service('rabbitmq');
    const mounts = strings(rabbit.volumes).map((v) => v.split(':'));
    const defsMount = mounts.find((m) => m[1] === '/etc/rabbitmq/definitions.json');
    const confMount = mounts.find((m) => m[1] === '/etc/rabbitmq/rabbitmq.conf');
    expect(defsMount, 'definitions.json mounted').toBeDefined();
    expect(confMount, 'rabbitmq.conf mounted').toBeDefined();
    const conf = read(confMount![0]!.replace(/^\.\//, ''));
    expect(conf).toMatch(/^definitions\.local\.path = \/etc\/rabbitmq\/definitions\.json$/m);
    // Definitions imported at boot replace the default user; a remote guest also needs loopback_users off.
    expect(conf).toMatch(/^loopback_users\.guest = false$/m);
    const defs = JSON.parse(read(defsMount![0]!.replace(/^\.\//, ''))) as { users: { name: string }[]; queues: { name: string; durable: boolean }[] };
    expect(defs.users.map((u) => u.name)).toContain('guest');
    const declared = new Set(defs.queues.filter((q) => q.durable).map((q) => q.name));
    const needed = config.bridges.flatMap((b) =>
      [b.source, b.target, b.deadLetter].filter((e) => e !== undefined && e.connection.type === 'amqp' && !('exchange' in e && e.exchange)).map((e) => e!.queue),
    );
    expect(needed.length).toBeGreaterThan(0);
    for (const q of needed) expect(declared, `queue ${q}`).toContain(q);
  });

  it("enables RabbitMQ's management, shovel and STOMP plugins at boot, STOMP published on the host's 61614", () => {
    const rabbit = service('rabbitmq');
    const mount = strings(rabbit.volumes)
      .map((v) => v.split(':'))
      .find((m) => m[1] === '/etc/rabbitmq/enabled_plugins');
    expect(mount, 'enabled_plugins mounted').toBeDefined();
    // An Erlang term: one list of atoms, ended by a full stop.
    const text = read(mount![0]!.replace(/^\.\//, '')).trim();
    expect(text).toMatch(/^\[[a-z_,\s]+\]\.$/);
    const plugins = text.slice(1, -2).split(',').map((p) => p.trim());
    for (const p of ['rabbitmq_management', 'rabbitmq_shovel', 'rabbitmq_shovel_management', 'rabbitmq_stomp']) expect(plugins).toContain(p);
    const conf = read(strings(rabbit.volumes).map((v) => v.split(':')).find((m) => m[1] === '/etc/rabbitmq/rabbitmq.conf')![0]!.replace(/^\.\//, ''));
    expect(conf).toMatch(/^stomp\.listeners\.tcp\.1 = 61613$/m);
    expect(strings(rabbit.ports)).toContain('127.0.0.1:${RABBITMQ_STOMP_HOST_PORT:-61614}:61613');
  });

  it('gives the drain time to finish before compose kills the bridge', async () => {
    const config = load();
    expect(durationMs(bridge.stop_grace_period)).toBeGreaterThan(config.shutdownTimeout);
  });
});
