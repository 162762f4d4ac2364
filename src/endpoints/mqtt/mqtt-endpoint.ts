/**
 * What the MQTT source and target share: one session (./mqtt-session.ts) per endpoint object, opened once, reported
 * lost once, closed with a DISCONNECT. The subclasses add what they do with it (SUBSCRIBE and PUBACK, or PUBLISH).
 */
import type { MqttConnectionConfig } from '../../config/protocols/mqtt-schema.js';
import { TransientError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { tellLost } from '../endpoint-handlers.js';
import { EndpointLifecycle } from '../endpoint-lifecycle.js';
import { connectMqtt } from './mqtt-connect.js';
import type { MqttSession, MqttSessionOptions } from './mqtt-session.js';

export abstract class MqttEndpoint {
  protected session: MqttSession | undefined;
  /** Opened once, lost at most once, closed once (../endpoint-lifecycle.ts). */
  protected readonly life: EndpointLifecycle;

  protected constructor(
    protected readonly conn: MqttConnectionConfig,
    /** The client id this endpoint connects with (resolved: ../../config/protocols/mqtt-address.ts defaultClientId). */
    protected readonly clientId: string,
    readonly description: string,
    readonly address: string,
    protected readonly log: Logger,
  ) {
    this.life = new EndpointLifecycle(description);
  }

  /**
   * The name its connection goes by at the broker — its client ID (Mosquitto logs it, EMQX lists it) — while
   * the session is open (SourceEndpoint.connectionName: GET /bridges and the page); undefined otherwise.
   */
  get connectionName(): string | undefined {
    return this.session?.isOpen === true && !this.life.over ? this.clientId : undefined;
  }

  /** Closed, or lost: nothing more is done on the session. */
  protected get closed(): boolean {
    return this.life.over;
  }

  /**
   * Connects (once per object). `onLost` fires at most once, for a loss that close() did not cause. Rejects with
   * TransientError when close() came while connecting.
   */
  protected async connect(options: Omit<MqttSessionOptions, 'clientId'>, onLost: (error: TransientError) => void): Promise<MqttSession> {
    this.life.begin();
    const session = await connectMqtt(this.conn, { ...options, clientId: this.clientId }, this.log);
    this.session = session;
    if (this.life.over) {
      session.destroy();
      throw this.life.closedWhileOpening();
    }
    session.onLost((error) => {
      if (this.life.lose() === undefined) return;
      this.lost(error);
      tellLost(onLost, error, this.log);
    });
    return session;
  }

  /** Called once when the session is lost, before the core hears of it. */
  protected lost(_error: TransientError): void {}

  /** Log fields of the open connection: where, which MQTT version, what the broker announced. */
  protected connectionFields(session: MqttSession): Record<string, unknown> {
    const s = session.serverInfo;
    return {
      peer: session.peer,
      mqttVersion: session.version === 5 ? '5' : '3.1.1',
      clientId: this.clientId,
      sessionPresent: s.sessionPresent,
      ...(session.version === 5 ? { brokerReceiveMaximum: s.receiveMaximum } : {}),
    };
  }

  /** DISCONNECT (bounded wait) and close. Never throws. */
  async close(): Promise<void> {
    if (this.life.over && !this.session?.isOpen) return;
    this.life.close();
    await this.session?.disconnect();
  }
}
