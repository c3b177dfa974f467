// The client library behind a source, as its settings choose: on the main thread for topic checks
// and offsets, and where the dataset consumers run (the main thread or the fetch thread).
import type { Logger } from 'pino';
import type { KafkaConnection } from '../../cluster/kafka-client.js';
import type { IngestionKafkaClient } from './feed-client.js';
import { KafkajsIngestionClient } from './kafkajs-client.js';
import { PlatformaticIngestionClient } from './platformatic-client.js';
import type { KafkaSourceSettings } from './settings.js';

export function ingestionClientOf(connection: KafkaConnection, settings: KafkaSourceSettings, log: Logger): IngestionKafkaClient {
  return settings.client === 'platformatic' ? new PlatformaticIngestionClient(connection, settings, log) : new KafkajsIngestionClient(connection, log);
}
