// A `ShardherdClient` over Kafka: the cluster's bus topics under its prefix, read with a bus of the
// client's own. Kept apart from the client so that the client (and the embedded mode) never load
// kafkajs; exported from `shardherd/kafka`.
import { pino } from 'pino';
import { KafkaBus, type KafkaBusOptions } from '../cluster/kafka-bus.js';
import { ShardherdClient, type ShardherdClientOptions } from './shardherd-client.js';

export interface KafkaClientOptions extends Omit<ShardherdClientOptions, 'bus' | 'onClose'> {
  /** The cluster's brokers, `host:port`. */
  readonly brokers: readonly string[];
  /** Kafka's client id; default `shardherd-client-<name>`. */
  readonly clientId?: string;
  /** The bus's Kafka settings, as the nodes have them (`kafka.maxRecordBytes` and the rest); defaults as a node's. */
  readonly kafka?: Omit<KafkaBusOptions, 'brokers' | 'clientId' | 'log' | 'clock'>;
}

/**
 * Connects a client to the cluster whose nodes run with `runtime.topicPrefix` = `topicPrefix` on
 * these brokers. Rejects with `CONNECT_FAILED` (nothing left open) when the prefix's topics do not
 * exist (a wrong prefix: the client never creates them), the brokers cannot be reached, or no
 * singleton answers within `connectTimeoutMs`.
 */
export async function connectKafkaClient(options: KafkaClientOptions): Promise<ShardherdClient> {
  const { brokers, clientId, kafka, ...clientOptions } = options;
  const bus = new KafkaBus({
    ...kafka,
    brokers,
    clientId: clientId ?? `shardherd-client-${options.name ?? 'client'}`,
    log: options.log ?? pino({ level: 'silent' }),
    ...(options.clock ? { clock: options.clock } : {}),
  });
  return ShardherdClient.connect({ ...clientOptions, bus, onClose: () => bus.close() });
}
