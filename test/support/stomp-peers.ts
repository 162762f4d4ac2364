/**
 * The real STOMP peers the STOMP suites run against, one describe.each over this list: ActiveMQ Classic (STOMP_URL)
 * and RabbitMQ's STOMP plugin (RABBITMQ_STOMP_URL, vhost `/`). What differs between them and matters to a test is
 * said here, once.
 */
import { services } from './services.js';
import { RABBITMQ_STOMP_VHOST } from './stomp.js';

export interface StompPeer {
  /** For test names: `activemq` or `rabbitmq`. */
  readonly name: 'activemq' | 'rabbitmq';
  /** The connection name in the bridges.yaml of the tests (test/support/configs.ts). */
  readonly connection: 'activemq' | 'rabbitstomp';
  readonly url: string;
  /** The STOMP `host` header (vhost) to connect with, if any. */
  readonly host?: string;
  /** Its `message-id` is the same on a redelivery (ActiveMQ Classic): the bridge takes it as the ID. */
  readonly stableMessageId: boolean;
  /** A NACKed or poisoned message would land in ActiveMQ.DLQ (checked to stay empty of ours). */
  readonly hasActiveMqDlq: boolean;
}

export const ACTIVEMQ_PEER: StompPeer = {
  name: 'activemq',
  connection: 'activemq',
  get url() {
    return services.stompUrl;
  },
  stableMessageId: true,
  hasActiveMqDlq: true,
};

export const RABBITMQ_STOMP_PEER: StompPeer = {
  name: 'rabbitmq',
  connection: 'rabbitstomp',
  get url() {
    return services.rabbitStompUrl;
  },
  host: RABBITMQ_STOMP_VHOST,
  stableMessageId: false,
  hasActiveMqDlq: false,
};

export const STOMP_PEERS: readonly StompPeer[] = [ACTIVEMQ_PEER, RABBITMQ_STOMP_PEER];
