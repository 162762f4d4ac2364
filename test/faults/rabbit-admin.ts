/**
 * RabbitMQ administration the fault suite needs: a vhost of its own (so that "the bridge's connections" are simply
 * the connections of that vhost that are not the harness's, and cleanup is one DELETE), closing connections from the
 * broker side over the management API, restarting the broker app, and the global max_message_size.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { sleep } from '../support/wait.js';

const run = promisify(execFile);

/** Prefix of the connection names the harness itself uses: those are never closed by a fault. */
export const HARNESS_CONNECTION_PREFIX = 'faults-harness';

export interface RabbitConnectionInfo {
  name: string;
  vhost: string;
  clientName: string;
  /** e.g. `AMQP 0-9-1`, `STOMP 1.2`. */
  protocol: string;
}

export class RabbitAdmin {
  private readonly base: string;
  private readonly auth: string;

  constructor(managementUrl = process.env.RABBITMQ_MANAGEMENT_URL ?? 'http://guest:guest@127.0.0.1:15672') {
    const u = new URL(managementUrl);
    this.auth = 'Basic ' + Buffer.from(`${decodeURIComponent(u.username || 'guest')}:${decodeURIComponent(u.password || 'guest')}`).toString('base64');
    u.username = '';
    u.password = '';
    this.base = u.toString().replace(/\/$/, '');
  }

  private async call(method: string, path: string, body?: unknown): Promise<Response> {
    const res = await fetch(`${this.base}/api${path}`, {
      method,
      headers: { authorization: this.auth, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(10_000),
    });
    return res;
  }

  /** Fails with a sentence when the management API does not answer (plugin not enabled). */
  async check(): Promise<void> {
    try {
      const res = await this.call('GET', '/overview');
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
    } catch (err) {
      throw new Error(
        `the RabbitMQ management API at ${this.base} does not answer (${(err as Error).message}); enable it with \`rabbitmq-plugins enable rabbitmq_management\` or set RABBITMQ_MANAGEMENT_URL`,
      );
    }
  }

  async createVhost(vhost: string, user = 'guest'): Promise<void> {
    const v = encodeURIComponent(vhost);
    let res = await this.call('PUT', `/vhosts/${v}`, {});
    if (!res.ok) throw new Error(`could not create vhost ${vhost}: HTTP ${res.status} ${await res.text()}`);
    res = await this.call('PUT', `/permissions/${v}/${encodeURIComponent(user)}`, { configure: '.*', write: '.*', read: '.*' });
    if (!res.ok) throw new Error(`could not grant ${user} on vhost ${vhost}: HTTP ${res.status} ${await res.text()}`);
  }

  async deleteVhost(vhost: string): Promise<void> {
    await this.call('DELETE', `/vhosts/${encodeURIComponent(vhost)}`).catch(() => undefined);
  }

  async connections(vhost: string): Promise<RabbitConnectionInfo[]> {
    const res = await this.call('GET', `/vhosts/${encodeURIComponent(vhost)}/connections?columns=name,vhost,client_properties,protocol`);
    if (!res.ok) throw new Error(`list connections: HTTP ${res.status}`);
    const list = (await res.json()) as { name: string; vhost: string; protocol?: string; client_properties?: { connection_name?: string } }[];
    return list.map((c) => ({ name: c.name, vhost: c.vhost, clientName: c.client_properties?.connection_name ?? '', protocol: c.protocol ?? '' }));
  }

  /**
   * The connections of the run's vhost that belong to the bridge process `pid` the suite started: an AMQP connection by
   * its name (the bridge names each `broker-bridge … #<pid>.<n>`, src/endpoints/connection-share.ts), a STOMP one (which
   * carries no name) by being in the run's own vhost. Never the harness's, never another process's: other tests share
   * this RabbitMQ, and a fault must not reach them.
   */
  async bridgeConnections(vhost: string, pid: number | undefined): Promise<RabbitConnectionInfo[]> {
    if (pid === undefined) return [];
    const ours = new RegExp(`^broker-bridge .* #${pid}\\.\\d+$`);
    return (await this.connections(vhost)).filter(
      (c) => !c.clientName.startsWith(HARNESS_CONNECTION_PREFIX) && (c.protocol.startsWith('STOMP') ? c.clientName === '' : ours.test(c.clientName)),
    );
  }

  /** Closes one connection from the broker side (the client gets connection.close 320 CONNECTION_FORCED). */
  /**
   * A queue's counts as the management API last sampled them (every collect_statistics_interval, 5 s by default):
   * `messages_unacknowledged` is what consumers hold unacked.
   */
  async queueCounts(vhost: string, queue: string): Promise<{ ready: number; unacknowledged: number } | undefined> {
    const res = await this.call('GET', `/queues/${encodeURIComponent(vhost)}/${encodeURIComponent(queue)}`);
    if (!res.ok) return undefined;
    const q = (await res.json()) as { messages_ready?: number; messages_unacknowledged?: number };
    if (q.messages_unacknowledged === undefined) return undefined;
    return { ready: q.messages_ready ?? 0, unacknowledged: q.messages_unacknowledged };
  }

  async closeConnection(name: string): Promise<boolean> {
    const res = await this.call('DELETE', `/connections/${encodeURIComponent(name)}`).catch(() => undefined);
    return res?.ok ?? false;
  }

  /** `rabbitmqctl stop_app && start_app`: durable queues and persistent messages survive. */
  async restartBroker(downMs: number): Promise<void> {
    await run('rabbitmqctl', ['stop_app'], { timeout: 120_000 });
    await sleep(downMs);
    await run('rabbitmqctl', ['start_app'], { timeout: 120_000 });
    await run('rabbitmqctl', ['await_startup'], { timeout: 120_000 }).catch(() => undefined);
  }

  /** The rabbit application's max_message_size (bytes), read with rabbitmqctl eval. */
  async getMaxMessageSize(): Promise<number | undefined> {
    const { stdout } = await run('rabbitmqctl', ['eval', 'application:get_env(rabbit, max_message_size).'], { timeout: 30_000 });
    const m = /\{ok,\s*(\d+)\}/.exec(stdout);
    return m ? Number(m[1]) : undefined;
  }

  /**
   * Sets the global max_message_size. RabbitMQ 3.10 reads it when a channel opens: channels opened before keep the
   * old limit, channels opened after get the new one.
   */
  async setMaxMessageSize(bytes: number | undefined): Promise<void> {
    const expr = bytes === undefined ? 'application:unset_env(rabbit, max_message_size).' : `application:set_env(rabbit, max_message_size, ${Math.floor(bytes)}).`;
    await run('rabbitmqctl', ['eval', expr], { timeout: 30_000 });
  }
}
