/**
 * The connections of `bridges.yaml` (`connections.<name>`), part of its one schema (./schema.ts): one shape per
 * protocol (./protocols/<protocol>-schema.ts), told apart by `type`. A new protocol is one line of CONNECTION_SCHEMAS.
 */
import { z } from 'zod';
import { amqpConnectionSchema } from './protocols/amqp-schema.js';
import { stompConnectionSchema } from './protocols/stomp-schema.js';
import { natsConnectionSchema } from './protocols/nats-schema.js';
import { mqttConnectionSchema } from './protocols/mqtt-schema.js';
import { amqp10ConnectionSchema } from './protocols/amqp10-schema.js';

const CONNECTION_SCHEMAS = [amqpConnectionSchema, stompConnectionSchema, natsConnectionSchema, mqttConnectionSchema, amqp10ConnectionSchema] as const;

/** Every connection `type:`, in the order of CONNECTION_SCHEMAS. */
export const CONNECTION_TYPES = CONNECTION_SCHEMAS.map((s) => s.shape.type.value);

export const connectionSchema = z.discriminatedUnion('type', CONNECTION_SCHEMAS, {
  error: `expected a mapping with type: ${CONNECTION_TYPES.slice(0, -1).join(', ')} or ${CONNECTION_TYPES[CONNECTION_TYPES.length - 1]}`,
});
