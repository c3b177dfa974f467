// A `ShardherdClient` over Kafka: the cluster's bus topics under its prefix, read with a bus of the
// client's own. Kept apart from the client so that the client (and the embedded mode) never load
// kafkajs; exported from `shardherd/kafka`.
import { pino } from 'pino';
import { anyBrokerAccepts } from '../cluster/broker-reach.js';
import { KafkaBus, KafkaBusError, type KafkaBusOptions } from '../cluster/kafka-bus.js';
import { ShardherdClientError } from './client-errors.js';
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
 * Connects a client to the cluster whose nodes run with `cluster` = `topicPrefix` in their config
 * files on these brokers. Rejects with `CONNECT_FAILED` (nothing left open), saying which of these
 * it was: no broker could be reached (naming the brokers); the brokers answered but the prefix's
 * topics do not exist (a wrong prefix, or no node ever started: the client never creates them); or
 * no singleton answered within `connectTimeoutMs`. Telling the first apart takes up to a second
 * more after the failure (a connection attempt to each broker).
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
  try {
    return await ShardherdClient.connect({ ...clientOptions, bus, onClose: () => bus.close() });
  } catch (e) {
    throw await explained(e, brokers, options.topicPrefix ?? 'shardherd');
  }
}

/** A failed connect as what it was: brokers out of reach, a prefix with no topics, or the client's own answer. */
async function explained(e: unknown, brokers: readonly string[], prefix: string): Promise<unknown> {
  if (!(e instanceof ShardherdClientError) || e.code !== 'CONNECT_FAILED') return e;
  if (!(await anyBrokerAccepts(brokers))) {
    return new ShardherdClientError(
      'CONNECT_FAILED',
      `no Kafka broker could be reached at ${brokers.join(', ')} (the client's brokers): is Kafka running there, and are the addresses right?`,
      { cause: e },
    );
  }
  const cause = e.cause;
  if (cause instanceof KafkaBusError && cause.code === 'TOPIC_MISSING') {
    return new ShardherdClientError(
      'CONNECT_FAILED',
      `Kafka at ${brokers.join(', ')} answered, but no shardherd cluster uses the topic prefix ${prefix} there: its topic ${cause.topic ?? `${prefix}.events`} does not exist ` +
        "(is topicPrefix the `cluster` of the nodes' config files, and has a node of it started on these brokers?)",
      { cause: e },
    );
  }
  return e;
}
