/**
 * Where the tests find the real brokers. The vitest globalSetup (test/support/global-setup.ts) fills these from the
 * environment or from testcontainers; a test that reads one that is missing fails with a message naming it.
 */
function required(name: string): string {
  const v = process.env[name];
  if (!v) {
    throw new Error(
      `${name} is not set. Set AMQP_URL, REDIS_URL, STOMP_URL and RABBITMQ_STOMP_URL to running services, or run with a Docker engine so that testcontainers can start them (not RABBITMQ_STOMP_URL: see test/support/global-setup.ts).`,
    );
  }
  return v;
}

export const services = {
  get amqpUrl(): string {
    return required('AMQP_URL');
  },
  get redisUrl(): string {
    return required('REDIS_URL');
  },
  get stompUrl(): string {
    return required('STOMP_URL');
  },
  /** Startup nodes of the local Redis Cluster (REDIS_CLUSTER_URLS; scripts/redis-cluster.sh). */
  get redisClusterUrls(): string[] {
    return topologyList('REDIS_CLUSTER_URLS', 'REDIS_CLUSTER_UNAVAILABLE', 'Redis Cluster', 'scripts/redis-cluster.sh', 'REDIS_CLUSTER_URLS');
  },
  /** The local Sentinel setup (REDIS_SENTINEL_URLS, REDIS_SENTINEL_NAME; scripts/redis-sentinel.sh). */
  get redisSentinel(): { name: string; urls: string[] } {
    const urls = topologyList('REDIS_SENTINEL_URLS', 'REDIS_SENTINEL_UNAVAILABLE', 'Redis Sentinel', 'scripts/redis-sentinel.sh', 'REDIS_SENTINEL_URLS and REDIS_SENTINEL_NAME');
    return { name: process.env.REDIS_SENTINEL_NAME || 'mymaster', urls };
  },
  /** RabbitMQ's STOMP plugin (default stomp://guest:guest@127.0.0.1:61614), the second real STOMP peer; vhost `/`. */
  get rabbitStompUrl(): string {
    return required('RABBITMQ_STOMP_URL');
  },
  /** Mosquitto (MOSQUITTO_URL, default mqtt://127.0.0.1:1883), MQTT 5 and 3.1.1. */
  get mosquittoUrl(): string {
    return mqttPeer('MOSQUITTO');
  },
  /** RabbitMQ's MQTT plugin (RABBITMQ_MQTT_URL, default mqtt://guest:guest@127.0.0.1:1884), MQTT 3.1.1, vhost `/`. */
  get rabbitMqttUrl(): string {
    return mqttPeer('RABBITMQ_MQTT');
  },
  /** ActiveMQ's MQTT transport (ACTIVEMQ_MQTT_URL, default mqtt://127.0.0.1:1885), MQTT 3.1.1. */
  get activemqMqttUrl(): string {
    return mqttPeer('ACTIVEMQ_MQTT');
  },
  /** RabbitMQ management API (http://guest:guest@127.0.0.1:15672), used by fault tests to close connections. */
  get rabbitManagementUrl(): string | undefined {
    return process.env.RABBITMQ_MANAGEMENT_URL;
  },
};

/** A name unique to this test run, for queues, exchanges and Redis keys. */
let counter = 0;
export function uniqueName(prefix: string): string {
  counter += 1;
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${counter}`;
}

/**
 * A comma-separated list from the environment, or a sentence saying why the setup is missing: the global setup could
 * not start it (the reason is in `unavailableVar`), or the test runs without it.
 */
function topologyList(name: string, unavailableVar: string, what: string, script: string, vars: string): string[] {
  const v = process.env[name];
  if (v) {
    return v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  }
  const why = process.env[unavailableVar];
  throw new Error(
    `This test needs a ${what}, and ${why ? `the test setup could not start one (${why})` : `${name} is not set`}. ` +
      `Run \`bash ${script} start\` (it needs Debian's redis-server), or set ${vars} to a running one.`,
  );
}

/** An MQTT peer's URL (<name>_URL), or the sentence ./mqtt-setup.ts left in <name>_UNAVAILABLE. */
function mqttPeer(name: 'MOSQUITTO' | 'RABBITMQ_MQTT' | 'ACTIVEMQ_MQTT'): string {
  const v = process.env[`${name}_URL`];
  if (v) return v;
  const why = process.env[`${name}_UNAVAILABLE`];
  throw new Error(why ? `This test needs ${why}` : `${name}_URL is not set (test/support/mqtt-setup.ts fills it when the broker answers locally).`);
}
