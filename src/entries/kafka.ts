/**
 * `shardherd/kafka`: the Kafka adapters of a real deployment (the bus, the membership, the ingestion
 * source) and the gateway's `ShardedProducer`. Loads kafkajs; @platformatic/kafka is loaded by what uses it.
 */
export type { KafkaConnection } from '../cluster/kafka-client.js';
export { BrokersUnreachableError } from '../cluster/broker-reach.js';
// What the bus's and the membership's constructors throw for an option that cannot work.
export { ConfigError } from '../cluster/config-error.js';
export type { BusCompression, KafkaBusErrorCode, KafkaBusOptions } from '../cluster/kafka-bus.js';
export { KafkaBus, KafkaBusError } from '../cluster/kafka-bus.js';
export type { KafkaMembershipErrorCode, KafkaMembershipOptions } from '../cluster/kafka-membership.js';
export { KafkaMembership, KafkaMembershipError } from '../cluster/kafka-membership.js';
export type { KafkaClientLibrary, KafkaFetchOptions, KafkaIngestionSourceOptions, KafkaValueDecoder } from '../ingest/kafka-source.js';
export { decodeKafkaValue, KafkaIngestionSource } from '../ingest/kafka-source.js';
export type { SentRecord, ShardedProducerOptions, ShardedRecord } from '../client/sharded-producer.js';
export { ShardedProducer } from '../client/sharded-producer.js';
export type { KafkaClientOptions } from '../client/kafka-client.js';
export { connectKafkaClient } from '../client/kafka-client.js';
