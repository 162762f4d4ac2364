/**
 * One MQTT connection, on MQTT.js's codec (`mqtt-packet`) under a session of our own: CONNECT/CONNACK, SUBSCRIBE,
 * QoS 1 PUBLISH both ways, PUBACK, PINGREQ, DISCONNECT, for MQTT 3.1.1 and 5. It never reconnects (one MqttSession is
 * one connection; the supervisor builds the next) and never retries.
 *
 * Why not MQTT.js's client (`mqtt` on npm, 5.16, read in its source): it reads the packets of a connection one at a
 * time and sends the PUBACK of a QoS 1 PUBLISH when `handleMessage(packet, callback)` calls back
 * (build/lib/handlers/publish.js: `client.handleMessage(packet, () => client._sendPacket({ cmd: 'puback' … }, done))`,
 * and `done` is what pulls the next packet off its queue, build/lib/client.js `work`/`nextTickWork`). Holding the
 * callback until the target confirmed therefore holds every packet behind it — the next PUBLISH, PINGRESP, SUBACK — so
 * one message is in flight at a time; calling back early sends the PUBACK before the target confirmed. Its
 * `customHandleAcks` (MQTT 5 only) is asked before the message is even emitted, with the same `done` behind it; there
 * is no manual-ack option. What a bridge needs — a window of QoS 1 messages in flight (the receive maximum the source
 * announces) and their PUBACKs in the order the PUBLISHes came, each after its target confirmed — is the source's
 * ordering of acks (./puback-order.ts) on top of this session, which hands over every PUBLISH at once and writes a
 * PUBACK when told. The target side is the same session: QoS 1 publishes with packet identifiers, at most the broker's
 * receive maximum unacknowledged, each resolved by its PUBACK (with its MQTT 5 reason code).
 *
 * Bounded reads (./packet-reader.ts): a PUBLISH over `max-packet-size` is read in part and handed on as unreadable, so
 * that it is dead-lettered and PUBACKed and the connection goes on; any other packet over it ends the connection. The
 * limit is not announced to the broker: an MQTT 5 broker would then drop a larger message as if delivered, a loss.
 */
import net from 'node:net';
import tls from 'node:tls';
import mqttPacket, { type IConnackPacket, type IPublishPacket, type ISubackPacket, type Packet, type Parser } from 'mqtt-packet';
import type { MqttConnectionConfig } from '../../config/protocols/mqtt-schema.js';
import { ConfigError, TransientError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { describeMqttServer, type MqttServer } from '../../config/protocols/mqtt-address.js';
import { defaultServername, tlsConnectionOptions } from '../../config/tls.js';
import { socketSentence, tlsFailure } from '../../shared/error-sentences.js';
import { coalesceWrites } from '../../shared/coalesce-writes.js';
import { Deque } from '../../shared/deque.js';
import { disconnectSentence, reasonName } from './mqtt-reasons.js';
import { VersionRefused, connackRefusal, connectPacket, type ConnectOptions, type MqttVersion } from './mqtt-handshake.js';
import { encodePubacks, encodePublish, type OutgoingPublish, type PublishAck } from './mqtt-publish.js';
import { serverInfo, type MqttServerInfo } from './mqtt-server-info.js';
import { PacketReader } from './packet-reader.js';
import { partialPacket, unreadableOf } from './partial-publish.js';
import type { Unreadable } from '../../core/message.js';
import { MAX_PACKET_ID, PacketIds } from './packet-ids.js';

/** What a session connects with, besides the connection's settings. */
export interface MqttSessionOptions extends ConnectOptions {
  /**
   * Every PUBLISH the broker sends, in order, from the moment CONNACK arrived (a resumed session's unacked messages
   * come right after it, before any SUBSCRIBE). Called synchronously from the socket's data handler. `unreadable`: the
   * PUBLISH was over a limit and `packet` holds what was read of it (./partial-publish.ts).
   */
  onPublish?: (packet: IPublishPacket, session: MqttSession, unreadable?: Unreadable) => void;
}

/** How long close() waits for the broker to close the socket after DISCONNECT. */
const DISCONNECT_WAIT_MS = 2000;

interface Pending {
  id: number;
  message: OutgoingPublish;
  resolve: (ack: PublishAck) => void;
  reject: (err: Error) => void;
}

export class MqttSession {
  /** `host:port`, for logs. */
  readonly peer: string;
  private socket!: net.Socket;
  /** mqtt-packet's parser, fed one whole packet at a time by the intake. */
  private readonly parser: Parser;
  private readonly reader: PacketReader;
  private connected = false;
  private ended = false;
  private lostError?: TransientError;
  private readonly lostListeners: ((error: TransientError) => void)[] = [];
  private server!: MqttServerInfo;
  private keepaliveTimer?: NodeJS.Timeout;
  private lastRead = Date.now();
  private lastWrite = Date.now();
  // Outgoing QoS 1 PUBLISHes: written and waiting for their PUBACK, and waiting for a slot in the receive maximum.
  private readonly inFlight = new Map<number, Pending>();
  private readonly waiting = new Deque<Pending>();
  private readonly ids = new PacketIds();
  private readonly pings: { resolve: () => void; reject: (e: Error) => void }[] = []; // PINGRESPs come back in order
  private readonly subscribes = new Map<number, { resolve: (p: ISubackPacket) => void; reject: (e: Error) => void }>();
  private handshake?: { resolve: (p: IConnackPacket) => void; reject: (e: Error) => void };

  private constructor(
    private readonly conn: MqttConnectionConfig,
    private readonly srv: MqttServer,
    readonly version: MqttVersion,
    private readonly options: MqttSessionOptions,
    private readonly log: Logger,
  ) {
    this.peer = describeMqttServer(srv);
    this.parser = mqttPacket.parser({ protocolVersion: version });
    this.reader = new PacketReader(version, conn.maxPacketSize, {
      packet: (buffer) => this.parser.parse(buffer),
      partial: (p) => this.dispatchPublish(partialPacket(p), unreadableOf(p, conn.maxPacketSize, this.what)),
      refuse: (sentence) => this.protocolError(sentence),
    });
  }

  /** `MQTT connection 'name' (host:port)`, the subject of every sentence. */
  get what(): string {
    return `MQTT connection '${this.conn.name}' (${this.peer})`;
  }

  get isOpen(): boolean {
    return this.connected && !this.ended;
  }

  get serverInfo(): MqttServerInfo {
    return this.server;
  }

  /** The user name the session logged in with (from the URL), for `check`. */
  get username(): string | undefined {
    return this.srv.username;
  }

  static async open(conn: MqttConnectionConfig, server: MqttServer, version: MqttVersion, options: MqttSessionOptions, log: Logger): Promise<MqttSession> {
    const session = new MqttSession(conn, server, version, options, log);
    await session.start();
    return session;
  }

  private start(): Promise<void> {
    const { conn, srv } = this;
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const fail = (error: Error): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.ended = true;
        this.socket?.destroy();
        reject(error);
      };
      const timer = setTimeout(
        () => fail(new TransientError(`${this.what}: the broker did not answer CONNECT within ${conn.connectTimeout} ms`)),
        conn.connectTimeout,
      );
      this.handshake = {
        resolve: (connack) => {
          if (settled) return;
          const refused = connackRefusal(this.version, connack, this.what);
          if (refused) return fail(refused);
          settled = true;
          clearTimeout(timer);
          this.connected = true;
          this.server = serverInfo(connack);
          this.startKeepalive();
          resolve();
        },
        reject: fail,
      };
      const onConnect = (): void => {
        this.write(connectPacket(this.conn, this.srv, this.version, this.options));
      };
      if (srv.tls) {
        const sni = defaultServername(srv.host);
        this.socket = tls.connect({ host: srv.host, port: srv.port, ...(sni !== undefined ? { servername: sni } : {}), ...tlsConnectionOptions(conn.tls) }, onConnect);
      } else {
        this.socket = net.connect({ host: srv.host, port: srv.port, noDelay: true }, onConnect);
      }
      this.socket.setNoDelay(true);
      coalesceWrites(this.socket);
      this.socket.on('data', (chunk: Buffer) => this.read(chunk));
      this.socket.on('error', (err) => {
        if (!this.connected) {
          const tlsProblem = srv.tls ? tlsFailure(err, this.peer, conn.tls) : undefined;
          fail(
            tlsProblem !== undefined
              ? new ConfigError(`${this.what}: ${tlsProblem}`, { cause: err })
              : new TransientError(`${this.what}: ${socketSentence(err, 'clause', conn.connectTimeout) ?? err.message}`, { cause: err }),
          );
          return;
        }
        this.lose(new TransientError(`${this.what}: ${socketSentence(err, 'clause') ?? err.message}`, { cause: err }));
      });
      this.socket.on('close', () => {
        if (!this.connected) {
          fail(
            this.version === 5
              ? new VersionRefused(this.what, 'closed the connection on')
              : new TransientError(`${this.what}: the broker closed the connection without answering CONNECT`),
          );
          return;
        }
        // Mosquitto 2.0 closes the older connection of a client id without a word (no DISCONNECT 0x8e, checked): say it.
        const hint = this.options.clean ? '' : ` (a broker also does this when another client connects with client id '${this.options.clientId}')`;
        this.lose(new TransientError(`${this.what}: the broker closed the connection${hint}`));
      });
      this.parser.on('packet', (packet: Packet) => this.dispatch(packet));
      this.parser.on('error', (err: Error) => {
        const error = new TransientError(`${this.what}: malformed packet from the broker: ${err.message}`, { cause: err });
        if (this.connected) this.lose(error);
        else fail(error);
      });
    });
  }

  private read(chunk: Buffer): void {
    this.lastRead = Date.now();
    if (this.ended) return;
    this.reader.read(chunk);
  }

  private dispatch(packet: Packet): void {
    if (this.ended) return;
    switch (packet.cmd) {
      case 'connack':
        this.handshake?.resolve(packet);
        return;
      case 'publish':
        return this.dispatchPublish(packet);
      case 'puback':
        this.onPuback(packet.messageId ?? 0, packet.reasonCode ?? 0, packet.properties?.reasonString);
        return;
      case 'suback': {
        const id = packet.messageId ?? 0;
        const waiter = this.subscribes.get(id);
        this.subscribes.delete(id);
        waiter?.resolve(packet);
        return;
      }
      case 'pingresp':
        this.pings.shift()?.resolve();
        return;
      case 'disconnect':
        this.lose(new TransientError(`${this.what}: the broker ended the session: ${disconnectSentence(packet.reasonCode ?? 0, packet.properties?.reasonString, this.options.clientId)}`));
        return;
      default:
        // PUBREC/PUBREL/PUBCOMP (QoS 2), AUTH, UNSUBACK: nothing this session asked for.
        this.protocolError(`an unexpected ${packet.cmd.toUpperCase()} packet`);
    }
  }

  private dispatchPublish(packet: IPublishPacket, unreadable?: Unreadable): void {
    if (this.ended) return;
    if (!this.connected) return this.protocolError('a PUBLISH before CONNACK');
    if (packet.qos === 2) return this.protocolError('a QoS 2 PUBLISH on a QoS 1 subscription');
    this.options.onPublish?.(packet, this, unreadable);
  }

  private protocolError(what: string): void {
    const error = new TransientError(`${this.what}: protocol error: the broker sent ${what}; closing the connection`);
    if (this.connected) this.lose(error);
    else this.handshake?.reject(error);
  }

  private write(packet: Packet): void {
    this.writeBuffer(mqttPacket.generate(packet, { protocolVersion: this.version }));
  }

  private writeBuffer(buffer: Buffer): void {
    if (this.ended && this.connected) return;
    this.lastWrite = Date.now();
    this.socket.write(buffer);
  }

  private startKeepalive(): void {
    const seconds = this.server.serverKeepAlive ?? this.conn.keepalive;
    if (seconds <= 0) return;
    const ms = seconds * 1000;
    // A tick at a quarter of the interval: PINGREQ once half of it passed without a write, and the broker taken as gone
    // after one and a half intervals without a packet from it (it must answer a PINGREQ at once).
    this.keepaliveTimer = setInterval(() => {
      const now = Date.now();
      if (now - this.lastRead > ms * 1.5) {
        this.lose(new TransientError(`${this.what}: no packet from the broker for ${Math.round((now - this.lastRead) / 1000)} s (keep-alive ${seconds} s); treating the connection as broken`));
        return;
      }
      if (now - this.lastWrite >= ms / 2) this.ping().catch(() => undefined);
    }, Math.max(250, ms / 4));
    this.keepaliveTimer.unref();
  }

  /**
   * Resolves on the broker's PINGRESP to a PINGREQ written after everything written so far: the broker has read those
   * packets (it answers in order on one connection). Rejects with TransientError when the connection is lost.
   */
  ping(): Promise<void> {
    if (!this.isOpen) return Promise.reject(this.notOpen());
    return new Promise((resolve, reject) => {
      this.pings.push({ resolve, reject });
      this.write({ cmd: 'pingreq' });
    });
  }

  /**
   * SUBSCRIBE with one filter; resolves with the granted QoS. Rejects with ConfigError when the broker refuses the
   * subscription for good (not authorised, filter invalid, shared subscriptions not supported), TransientError
   * otherwise.
   */
  async subscribe(filter: string, qos: 0 | 1, options: { retainHandling?: 0 | 1 | 2 } = {}): Promise<number> {
    if (!this.isOpen) throw this.notOpen();
    const id = this.allocateId();
    const suback = await new Promise<ISubackPacket>((resolve, reject) => {
      this.subscribes.set(id, { resolve, reject });
      this.write({
        cmd: 'subscribe',
        messageId: id,
        subscriptions: [{ topic: filter, qos, ...(this.version === 5 ? { nl: false, rap: false, rh: options.retainHandling ?? 0 } : {}) }],
      });
    });
    const granted = suback.granted[0];
    const code = typeof granted === 'number' ? granted : 0x80;
    if (code <= 2) return code;
    const reason = this.version === 5 ? reasonName(code) : 'failure (0x80)';
    const detail = suback.properties?.reasonString !== undefined ? `: ${suback.properties.reasonString}` : '';
    const message = `${this.what}: the broker refused the subscription to '${filter}': ${reason}${detail}`;
    // 3.1.1 says only "failure": an ACL refusal, most likely, which no retry fixes; but a broker starting up may say it too.
    throw [0x87, 0x8f, 0x9e, 0xa1, 0xa2].includes(code) ? new ConfigError(message) : new TransientError(message);
  }

  /**
   * A QoS 1 PUBLISH; resolves with its PUBACK. At most the broker's receive maximum are written and unacknowledged at
   * once; the rest wait here, in order. Rejects with TransientError: outcome unknown when it was written and the
   * connection was lost before its PUBACK, not sent (outcome known) when it was never written.
   */
  publish(message: OutgoingPublish): Promise<PublishAck> {
    if (!this.isOpen) return Promise.reject(this.notOpen());
    return new Promise<PublishAck>((resolve, reject) => {
      const pending: Pending = { id: 0, message, resolve, reject };
      if (this.inFlight.size < this.window() && this.waiting.length === 0) this.send(pending);
      else this.waiting.push(pending);
    });
  }

  /**
   * The largest PUBLISH this session writes: the connection's max-packet-size, and the broker's maximum packet size
   * when it announced one (MQTT 5: a broker closes the connection on a larger packet).
   */
  private outgoingLimit(): number {
    const announced = this.server.maximumPacketSize;
    return announced === undefined ? this.conn.maxPacketSize : Math.min(announced, this.conn.maxPacketSize);
  }

  private window(): number {
    return Math.min(this.server.receiveMaximum, MAX_PACKET_ID - this.subscribes.size);
  }

  private send(pending: Pending): void {
    const id = this.allocateId();
    let buffer: Buffer;
    try {
      buffer = encodePublish(pending.message, id, this.version, this.outgoingLimit(), this.what, this.peer);
    } catch (err) {
      pending.reject(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    pending.id = id;
    this.inFlight.set(id, pending);
    this.writeBuffer(buffer);
  }

  private onPuback(id: number, reasonCode: number, reasonString?: string): void {
    const pending = this.inFlight.get(id);
    if (pending === undefined) return this.protocolError(`a PUBACK for packet ${id}, which is not in flight`);
    this.inFlight.delete(id);
    pending.resolve(reasonString !== undefined ? { reasonCode, reasonString } : { reasonCode });
    while (this.waiting.length > 0 && this.inFlight.size < this.window() && this.isOpen) this.send(this.waiting.shift()!);
  }

  /** Writes the PUBACKs of received QoS 1 PUBLISHes, in this order, as one buffer. A no-op once the connection is lost or closed. */
  pubacks(messageIds: readonly number[]): void {
    if (!this.isOpen) return;
    this.writeBuffer(encodePubacks(messageIds));
  }

  /** The first packet identifier not in use by an outgoing PUBLISH or SUBSCRIBE. */
  private allocateId(): number {
    return this.ids.allocate((id) => this.inFlight.has(id) || this.subscribes.has(id), this.what);
  }

  /** Registers the one handler of a loss; called at most once, never for close(). */
  onLost(listener: (error: TransientError) => void): void {
    if (this.lostError !== undefined) {
      const error = this.lostError;
      queueMicrotask(() => listener(error));
      return;
    }
    this.lostListeners.push(listener);
  }

  /** Ends the connection as broken, with `error` (e.g. a confirm that never came). */
  fail(error: TransientError): void {
    this.lose(error);
  }

  private lose(error: TransientError): void {
    if (this.ended) return;
    this.ended = true;
    this.lostError = error;
    this.teardown(error);
    this.socket.destroy();
    for (const l of this.lostListeners.splice(0)) l(error);
  }

  private teardown(error: TransientError): void {
    clearInterval(this.keepaliveTimer);
    const unknown = new TransientError(`${error.message}; a PUBLISH written before it may or may not have reached the broker`, {
      cause: error,
      outcomeUnknown: true,
    });
    for (const p of this.inFlight.values()) p.reject(unknown);
    this.inFlight.clear();
    while (this.waiting.length > 0) this.waiting.shift()!.reject(new TransientError(`${error.message}; not sent`, { cause: error }));
    for (const p of this.pings.splice(0)) p.reject(error);
    for (const s of this.subscribes.values()) s.reject(error);
    this.subscribes.clear();
  }

  private notOpen(): TransientError {
    return this.lostError ?? new TransientError(`${this.what} is not connected`);
  }

  /** DISCONNECT (normal, so an MQTT 5 broker keeps the session and sends no will), then close. Never throws. */
  async disconnect(waitMs = DISCONNECT_WAIT_MS): Promise<void> {
    if (this.ended) {
      this.socket?.destroy();
      return;
    }
    this.write(this.version === 5 ? { cmd: 'disconnect', reasonCode: 0 } : { cmd: 'disconnect' });
    this.ended = true;
    this.teardown(new TransientError(`${this.what} was closed`));
    const closed = new Promise<void>((resolve) => this.socket.once('close', () => resolve()));
    this.socket.end();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([closed, new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
    this.socket.destroy();
  }

  /** Closes at once, without DISCONNECT. */
  destroy(): void {
    if (!this.ended) {
      this.ended = true;
      this.teardown(new TransientError(`${this.what} was closed`));
    }
    this.socket?.destroy();
  }
}

