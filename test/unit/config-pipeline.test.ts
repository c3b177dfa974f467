// One config pipeline: each adapter's schema holds its defaults and checks, a bad value of any key
// is a ConfigError naming it (with its dotted path in a node config), and the node config's
// sections give exactly the adapters' settings, so the two cannot drift apart.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ShardedProducer } from '../../src/client/sharded-producer.js';
import { runtimeSettings } from '../../src/actors/settings.js';
import { ConfigError } from '../../src/cluster/config-error.js';
import { failureDetectorSettings } from '../../src/cluster/failure-detector/settings.js';
import { kafkaBusSettings } from '../../src/cluster/kafka-bus/settings.js';
import { kafkaMembershipSettings } from '../../src/cluster/kafka-membership/settings.js';
import type { KafkaClientLibrary } from '../../src/cluster/kafka-options.js';
import { kafkaSourceSettings, type FetchThreadChoice } from '../../src/ingest/kafka-source/settings.js';
import { membershipOptionsOf, NodeConfigError, parseNodeConfig, sourceOptionsOf } from '../../src/node/node-config.js';
import { kafkaBusOptions } from '../../src/node/run-node.js';

const log = pino({ level: 'silent' });
const connection = { brokers: ['127.0.0.1:9092'], clientId: 'c', log };
const minimal = { node: 'node-1', kafka: { brokers: ['127.0.0.1:9092'] }, cassandra: { contactPoints: ['127.0.0.1:9042'] } };

/** The ConfigError `f` throws; fails the test when it throws something else or nothing. */
function refusal(f: () => unknown): ConfigError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error('the options were accepted');
}

describe('KafkaBus settings', () => {
  it('gives the documented defaults for the required keys alone, and for null', () => {
    const defaults = {
      brokers: ['127.0.0.1:9092'],
      clientId: 'c',
      client: 'platformatic',
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1_000,
      rebalanceTimeoutMs: 10_000,
      maxWaitTimeMs: 250,
      replicationFactor: 1,
      connectionTimeoutMs: 3_000,
      maxRecordBytes: 262_144,
      maxMessageBytes: 67_108_864,
      chunkTimeoutMs: 30_000,
      compression: 'gzip',
    };
    expect(kafkaBusSettings(connection)).toEqual(defaults);
    const nulls = { client: null, sessionTimeoutMs: null, heartbeatIntervalMs: null, maxWaitTimeMs: null, compression: null, maxRecordBytes: null };
    expect(kafkaBusSettings({ ...connection, ...nulls })).toEqual(defaults);
  });

  it.each([
    ['brokers', ['nope']],
    ['clientId', ''],
    ['client', 'librdkafka'],
    ['sessionTimeoutMs', 0],
    ['heartbeatIntervalMs', 1.5],
    ['maxWaitTimeMs', -1],
    ['rebalanceTimeoutMs', 'long'],
    ['replicationFactor', 0],
    ['connectionTimeoutMs', 0],
    ['maxRecordBytes', 100],
    ['maxMessageBytes', 'big'],
    ['chunkTimeoutMs', 0],
    ['compression', 'zstd'],
  ])('refuses a bad %s with a ConfigError naming it', (key, value) => {
    const e = refusal(() => kafkaBusSettings({ ...connection, [key]: value } as never));
    expect(e.key).toBe(key);
    expect(e.message.startsWith(`KafkaBus option ${key} `)).toBe(true);
  });
});

describe('KafkaMembership settings', () => {
  const required = { ...connection, topicPrefix: 'cluster' };

  it('gives the documented defaults for the required keys alone, and for null', () => {
    const defaults = {
      brokers: ['127.0.0.1:9092'],
      clientId: 'c',
      client: 'platformatic',
      topicPrefix: 'cluster',
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1_000,
      rebalanceTimeoutMs: 10_000,
      joinTimeoutMs: 30_000,
      replicationFactor: 1,
    };
    expect(kafkaMembershipSettings(required)).toEqual(defaults);
    expect(kafkaMembershipSettings({ ...required, client: null, sessionTimeoutMs: null, joinTimeoutMs: null })).toEqual(defaults);
    expect(kafkaMembershipSettings({ ...required, sessionTimeoutMs: 6_000 })).toMatchObject({ heartbeatIntervalMs: 600, rebalanceTimeoutMs: 6_000 });
  });

  it.each([
    ['brokers', []],
    ['client', 'kafka-node'],
    ['topicPrefix', 'a b'],
    ['sessionTimeoutMs', 0],
    ['heartbeatIntervalMs', 10_000],
    ['replicationFactor', 0],
    ['rebalanceTimeoutMs', 1.5],
    ['joinTimeoutMs', -1],
    ['weight', 0],
    ['weight', -1],
    ['weight', 2_000_000],
  ])('refuses a bad %s with a ConfigError naming it', (key, value) => {
    const e = refusal(() => kafkaMembershipSettings({ ...required, [key]: value } as never));
    expect(e.key).toBe(key);
    expect(e.message.startsWith(`${key} `)).toBe(true);
  });
});

describe('KafkaIngestionSource settings', () => {
  const source = { ...connection, groupPrefix: 'c.ingest.n1', instanceId: 'i1' };

  it('gives the documented defaults for the required keys alone, and for null', () => {
    const { decode, ...defaults } = kafkaSourceSettings(source);
    expect(defaults).toEqual({
      groupPrefix: 'c.ingest.n1',
      instanceId: 'i1',
      bufferRecords: 30_000,
      bufferBytes: 8 * 1024 * 1024,
      recreateDelayMs: 50,
      maxBytesPerPartition: 1024 * 1024,
      maxBytes: 8 * 1024 * 1024,
      minBytes: 1,
      maxWaitTimeMs: 100,
      client: 'platformatic',
      fetchThread: 'worker',
      topicReplicationFactor: 1,
      commitOffsets: true,
      offsetsIntervalMs: 1_000,
    });
    expect(typeof decode).toBe('function');
    const { decode: _, ...withNulls } = kafkaSourceSettings({
      ...source,
      bufferRecords: null,
      commitOffsets: null,
      fetch: { maxBytes: null },
    } as never);
    expect(withNulls).toEqual(defaults);
  });

  it('draws an instance id of its own when none is given', () => {
    const { instanceId: _given, ...anonymous } = source;
    const { instanceId: a } = kafkaSourceSettings(anonymous);
    const { instanceId: b } = kafkaSourceSettings(anonymous);
    expect(a).toMatch(/^[0-9a-f]{8}$/);
    expect(a).not.toBe(b);
  });

  it.each([
    [{ bufferRecords: 1 }, 'bufferRecords', 'must be an integer of at least 2, got 1'],
    [{ groupPrefix: 'a b' }, 'groupPrefix', 'must be 1 to 1000 of letters, digits, ".", "_", "-", got "a b"'],
    [{ fetch: { maxBytes: 10 } }, 'fetch.maxBytes', 'must be an integer of at least 1024, got 10'],
    [{ fetchThread: 'both' as FetchThreadChoice }, 'fetchThread', 'must be "worker" or "main", got "both"'],
  ])('refuses %j with a ConfigError naming %s', (options, key, reason) => {
    const e = refusal(() => kafkaSourceSettings({ ...source, ...options }));
    expect([e.key, e.reason, e.message]).toEqual([key, reason, `KafkaIngestionSource option ${key} ${reason}`]);
  });
});

describe('ShardedProducer options', () => {
  it('refuses a Kafka client library it does not run on, naming kafkaClient, before it connects to anything', () => {
    const e = refusal(
      () => new ShardedProducer({ brokers: ['127.0.0.1:1'], clientId: 'gateway', log: pino({ enabled: false }), kafkaClient: 'rdkafka' as never }),
    );
    expect([e.key, e.message]).toEqual(['kafkaClient', 'ShardedProducer: kafkaClient must be one of "kafkajs", "platformatic", got "rdkafka"']);
  });
});

describe('failure detector and runtime settings', () => {
  it.each([
    ['mode', 'gossip'],
    ['heartbeatIntervalMs', 0],
    ['suspicionTimeoutMs', 'slow'],
    ['indirectProbes', 65],
    ['leaseMs', 50],
    ['singletonLeaseMs', 100],
    ['joinGraceMs', 10],
  ])('refuses a bad failureDetector.%s with a ConfigError naming it', (key, value) => {
    expect(refusal(() => failureDetectorSettings({ [key]: value })).key).toBe(`failureDetector.${key}`);
  });

  it('names a runtime key, and a failure detector key under the runtime with its path', () => {
    expect(runtimeSettings()).toMatchObject({ topicPrefix: 'shardherd', publishIntervalMs: 5_000, retryMaxMs: 5_000 });
    expect(refusal(() => runtimeSettings({ batchSize: 0 })).key).toBe('batchSize');
    expect(refusal(() => runtimeSettings({ retryInitialMs: 200, retryMaxMs: 100 })).key).toBe('retryMaxMs');
    expect(refusal(() => runtimeSettings({ failureDetector: { leaseMs: 50 } })).key).toBe('failureDetector.leaseMs');
    expect(refusal(() => runtimeSettings({ sinkTimeoutMs: -1 })).message).toBe('invalid runtime setting sinkTimeoutMs must be a number of milliseconds');
  });
});

describe('node config', () => {
  const refused = (input: object): NodeConfigError => {
    const e = refusal(() => parseNodeConfig({ ...minimal, ...input }, 'node.json'));
    expect(e).toBeInstanceOf(NodeConfigError);
    return e as NodeConfigError;
  };

  it.each([
    [{ kafka: { ...minimal.kafka, sessionTimeoutMs: 0 } }, 'kafka.sessionTimeoutMs'],
    // The bus's own check between keys, made when the file is read rather than when the bus starts.
    [{ kafka: { ...minimal.kafka, sessionTimeoutMs: 6_000, heartbeatIntervalMs: 6_000 } }, 'kafka.heartbeatIntervalMs'],
    [{ kafka: { ...minimal.kafka, maxRecordBytes: 100 } }, 'kafka.maxRecordBytes'],
    [{ failureDetector: { leaseMs: 50 } }, 'failureDetector.leaseMs'],
    [{ failureDetector: { joinGraceMs: 10 } }, 'failureDetector.joinGraceMs'],
    [{ failureDetector: { port: -1 } }, 'failureDetector.port'],
    [{ runtime: { batchSize: 0 } }, 'runtime.batchSize'],
    [{ runtime: { retryInitialMs: 200, retryMaxMs: 100 } }, 'runtime.retryMaxMs'],
  ])('refuses %j with a ConfigError naming %s', (input, key) => {
    const e = refused(input);
    expect(e.key).toBe(key);
    expect(e.message.startsWith(`node.json: ${key} `)).toBe(true);
  });

  it.each([
    {},
    { sessionTimeoutMs: 6_000 },
    { heartbeatIntervalMs: 200, topicReplicationFactor: 3 },
    { maxRecordBytes: 4096, maxMessageBytes: 8192, compression: 'none' },
  ])('its kafka section %j gives the bus the settings the bus gives the same keys', (kafka) => {
    const config = parseNodeConfig({ ...minimal, kafka: { ...minimal.kafka, ...kafka } });
    const { topicReplicationFactor, ...same } = kafka as { topicReplicationFactor?: number };
    const direct = kafkaBusSettings({ ...connection, clientId: 'shardherd-shardherd-node-1', replicationFactor: topicReplicationFactor, ...same });
    expect(kafkaBusSettings(kafkaBusOptions(config, log))).toEqual(direct);
  });

  it.each([{}, { sessionTimeoutMs: 6_000 }, { heartbeatIntervalMs: 200, topicReplicationFactor: 3 }])(
    'its kafka section %j gives the membership the settings the membership gives the same keys',
    (kafka) => {
      const config = parseNodeConfig({ ...minimal, kafka: { ...minimal.kafka, ...kafka } });
      const { topicReplicationFactor, ...same } = kafka as { topicReplicationFactor?: number };
      const member = { clientId: 'c', topicPrefix: 'p' };
      const direct = kafkaMembershipSettings({ ...connection, ...member, replicationFactor: topicReplicationFactor, ...same });
      expect(kafkaMembershipSettings({ ...membershipOptionsOf(config.kafka), ...member, log })).toEqual(direct);
    },
  );

  it.each<{ client?: KafkaClientLibrary; topicReplicationFactor?: number; fetchThread?: FetchThreadChoice }>([
    {},
    { client: 'platformatic' },
    { client: 'kafkajs', topicReplicationFactor: 3 },
    { fetchThread: 'main' },
  ])('its kafka section %j gives the ingestion source the settings the source gives the same keys', (kafka) => {
    const config = parseNodeConfig({ ...minimal, kafka: { ...minimal.kafka, ...kafka } });
    const source = { ...connection, groupPrefix: 'g', instanceId: 'i' };
    const { decode: _d, ...fromConfig } = kafkaSourceSettings({ ...source, ...sourceOptionsOf(config.kafka) });
    const { decode: _e, ...expected } = kafkaSourceSettings({ ...source, ...kafka });
    expect(fromConfig).toEqual(expected);
  });

  it('refuses a client it does not know, a fetch thread it has not, and the decoder key that is gone, naming the key', () => {
    expect(() => parseNodeConfig({ ...minimal, kafka: { ...minimal.kafka, client: 'rdkafka' } })).toThrow(
      /kafka\.client must be one of "kafkajs", "platformatic", got "rdkafka"/,
    );
    expect(() => parseNodeConfig({ ...minimal, kafka: { ...minimal.kafka, fetchThread: 'both' } })).toThrow(
      /kafka\.fetchThread must be "worker" or "main", got "both"/,
    );
    expect(() => parseNodeConfig({ ...minimal, kafka: { ...minimal.kafka, fetchDecoder: 'kafkajs' } })).toThrow(
      /kafka\.fetchDecoder is no longer an option: kafkajs decodes fetched records with its own decoder/,
    );
  });

  it.each([
    {},
    { mode: 'heartbeat', leaseMs: 400 },
    { suspicionTimeoutMs: 3000 },
    { heartbeatIntervalMs: 200, suspicionTimeoutMs: 600, leaseMs: 400, joinGraceMs: 0 },
  ])('its failureDetector section %j gives the settings the failure detector gives the same keys', (failureDetector) => {
    const config = parseNodeConfig({ ...minimal, failureDetector: { ...failureDetector, host: '0.0.0.0', port: 7100 } });
    expect(config.runtime.failureDetector).toEqual(failureDetectorSettings(failureDetector));
  });

  it.each([{}, { publishIntervalMs: 1_000, batchSize: 10 }, { retryInitialMs: 10, retryMaxMs: 10 }])(
    'its runtime section %j gives the settings the runtime gives the same keys',
    (runtime) => {
      const config = parseNodeConfig({ ...minimal, runtime });
      expect(config.runtime).toEqual(runtimeSettings({ ...runtime, topicPrefix: config.cluster }));
    },
  );
});
