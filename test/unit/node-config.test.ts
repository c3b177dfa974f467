import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXIT_USAGE, parseCommandLine } from '../../src/cli/options.js';
import { pino } from 'pino';
import { loadNodeConfig, metaStoreOptions, NodeConfigError, parseNodeConfig } from '../../src/node/node-config.js';
import { KafkaBus } from '../../src/cluster/kafka-bus.js';
import { kafkaBusOptions, startNode } from '../../src/node/run-node.js';
import { ShardherdNode, type ClusterServices } from '../../src/actors/node-process.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import { loadServeHandlers } from '../../src/node/serve-handlers.js';
import { nodeId, type DatasetRef, type ShardNum } from '../../src/core/ids.js';
import { tempDir } from '../support/temp-dir.js';

const minimal = { node: 'node-1', kafka: { brokers: ['127.0.0.1:9092'] }, cassandra: { contactPoints: ['127.0.0.1:9042'] } };

const refusal = (input: unknown): string => {
  try {
    parseNodeConfig(input, 'node.json');
  } catch (e) {
    expect(e).toBeInstanceOf(NodeConfigError);
    return (e as Error).message;
  }
  throw new Error('the config was accepted');
};

describe('node config', () => {
  it('accepts config/node.example.json with its datasets validated', async () => {
    const c = await loadNodeConfig('config/node.example.json');
    expect(c.node).toBe('node-1');
    expect(c.runtime.topicPrefix).toBe(c.cluster);
    expect(c.datasets.map((d) => [d.ref, d.numShards, d.source.type])).toEqual([['metrics', 16, 'kafka']]);
  });

  it('accepts the docker-compose node configs', async () => {
    for (const n of [1, 2, 3]) {
      const c = await loadNodeConfig(`config/docker/node-${n}.json`);
      expect([c.node, c.kafka.brokers, c.status?.host]).toEqual([`node-${n}`, ['kafka:9092'], '0.0.0.0']);
    }
  });

  it('fills in the documented defaults', () => {
    const c = parseNodeConfig(minimal);
    expect(c.cluster).toBe('shardherd');
    expect(c.kafka.sessionTimeoutMs).toBe(10_000);
    expect(c.kafka.client).toBe('platformatic');
    expect(c.cassandra).toMatchObject({
      localDataCenter: 'datacenter1',
      keyspace: 'shardherd',
      replicationFactor: 1,
      connectTimeoutMs: 60_000,
      maxConcurrentRequests: 128,
      maxMutationBytes: 1_048_576,
    });
    expect(c.sink).toEqual({ type: 'log' });
    expect(c.status).toBeUndefined();
    expect(c.runtime.publishIntervalMs).toBe(5_000);
  });

  it('a cassandra sink: its documented defaults, and bad keys refused by name', () => {
    expect(parseNodeConfig({ ...minimal, sink: { type: 'cassandra' } }).sink).toEqual({
      type: 'cassandra',
      table: 'shardherd_records',
      recordsPerBatch: 100,
      requestTimeoutMs: 12_000,
    });
    expect(
      parseNodeConfig({
        ...minimal,
        sink: { type: 'cassandra', table: 'recs', recordsPerBatch: 1, contactPoints: ['127.0.0.2:9042'], requestTimeoutMs: 60_000 },
      }).sink,
    ).toEqual({ type: 'cassandra', table: 'recs', recordsPerBatch: 1, contactPoints: ['127.0.0.2:9042'], requestTimeoutMs: 60_000 });
    expect(refusal({ ...minimal, sink: { type: 'cassandra', table: 'Bad-Name' } })).toMatch(/sink\.table/);
    expect(refusal({ ...minimal, sink: { type: 'cassandra', recordsPerBatch: 0 } })).toMatch(/sink\.recordsPerBatch/);
    expect(refusal({ ...minimal, sink: { type: 'cassandra', requestTimeoutMs: 'soon' } })).toMatch(/sink\.requestTimeoutMs/);
  });

  it("hands the cassandra keys to the MetaStore's options (what each changes: test/integration/cassandra-map-parts.test.ts)", () => {
    const log = pino({ level: 'silent' });
    const c = parseNodeConfig({
      ...minimal,
      cluster: 'prod',
      cassandra: { ...minimal.cassandra, keyspace: 'sh', replicationFactor: 3, maxConcurrentRequests: 16, maxMutationBytes: 4096 },
    });
    expect(metaStoreOptions(c, log)).toEqual({
      contactPoints: ['127.0.0.1:9042'],
      localDataCenter: 'datacenter1',
      keyspace: 'sh',
      replication: { class: 'SimpleStrategy', replicationFactor: 3 },
      cluster: 'prod',
      connectTimeoutMs: 60_000,
      maxConcurrentRequests: 16,
      maxMutationBytes: 4096,
      log,
    });
    expect(refusal({ ...minimal, cassandra: { ...minimal.cassandra, maxConcurrentRequests: 0 } })).toBe(
      'node.json: cassandra.maxConcurrentRequests must be at least 1',
    );
    expect(refusal({ ...minimal, cassandra: { ...minimal.cassandra, maxConcurrentRequests: 4096 } })).toBe(
      'node.json: cassandra.maxConcurrentRequests must be at most 2048',
    );
    expect(refusal({ ...minimal, cassandra: { ...minimal.cassandra, maxMutationBytes: 100 } })).toBe(
      'node.json: cassandra.maxMutationBytes must be at least 1024',
    );
  });

  it('names the key that is wrong, missing or unknown', () => {
    expect(refusal({ ...minimal, kafka: { brokers: ['localhost'] } })).toBe("node.json: kafka.brokers.0 must be host:port, got 'localhost'");
    expect(refusal({ kafka: minimal.kafka, cassandra: minimal.cassandra })).toBe('node.json: node is required');
    expect(refusal({ ...minimal, kafka: { ...minimal.kafka, sesionTimeoutMs: 5 } })).toBe('node.json: kafka.sesionTimeoutMs is not a known key');
    expect(refusal({ ...minimal, kafka: { ...minimal.kafka, client: 'fast' } })).toBe(
      'node.json: kafka.client must be one of "kafkajs", "platformatic", got "fast"',
    );
    expect(refusal({ ...minimal, runtime: { publishIntervalMs: 'often' } })).toBe('node.json: runtime.publishIntervalMs must be a number of milliseconds');
    expect(refusal({ ...minimal, runtime: { topicPrefix: 'x' } })).toBe('node.json: runtime.topicPrefix is set by "cluster" in a node config');
  });

  it('sizes the bus by kafka.maxRecordBytes, kafka.maxMessageBytes and kafka.compression, checked as the bus checks them', () => {
    const log = pino({ level: 'silent' });
    const defaults = new KafkaBus(kafkaBusOptions(parseNodeConfig(minimal), log)).settings;
    expect(defaults).toMatchObject({ maxRecordBytes: 262_144, maxMessageBytes: 67_108_864, compression: 'gzip' });
    const kafka = { ...minimal.kafka, maxRecordBytes: 65_536, maxMessageBytes: 1_048_576, compression: 'none' };
    const set = new KafkaBus(kafkaBusOptions(parseNodeConfig({ ...minimal, kafka }), log)).settings;
    expect(set).toMatchObject({ maxRecordBytes: 65_536, maxMessageBytes: 1_048_576, compression: 'none', clientId: 'shardherd-shardherd-node-1' });
    expect(refusal({ ...minimal, kafka: { ...minimal.kafka, maxRecordBytes: 512 } })).toBe(
      'node.json: kafka.maxRecordBytes must be a whole number from 1024 to 268435456, got 512',
    );
    expect(refusal({ ...minimal, kafka: { ...minimal.kafka, maxMessageBytes: 100_000 } })).toBe(
      'node.json: kafka.maxRecordBytes (262144) must be at most maxMessageBytes (100000)',
    );
    expect(refusal({ ...minimal, kafka: { ...minimal.kafka, maxMessageBytes: '64MB' } })).toBe('node.json: kafka.maxMessageBytes must be a number, got 64MB');
    expect(refusal({ ...minimal, kafka: { ...minimal.kafka, compression: 'zstd' } })).toBe('node.json: kafka.compression must be "gzip" or "none", got "zstd"');
  });

  it('takes the failure detector section: session-only by default, timings into the runtime, the endpoint apart', () => {
    const d = parseNodeConfig(minimal);
    expect(d.runtime.failureDetector).toEqual({
      mode: 'session-only',
      heartbeatIntervalMs: 100,
      suspicionTimeoutMs: 1800,
      indirectProbes: 3,
      leaseMs: 500,
      singletonLeaseMs: 5000,
      joinGraceMs: 5400,
    });
    expect(d.detector).toEqual({ host: '127.0.0.1', port: 0 });
    expect('failureDetector' in d).toBe(false);
    const c = parseNodeConfig({
      ...minimal,
      failureDetector: { mode: 'heartbeat', leaseMs: 400, host: '0.0.0.0', port: 7100, advertisedHost: 'node-1.internal' },
    });
    expect(c.runtime.failureDetector).toMatchObject({ mode: 'heartbeat', leaseMs: 400 });
    expect(c.detector).toEqual({ host: '0.0.0.0', port: 7100, advertisedHost: 'node-1.internal' });
    // Behind a proxy or a NAT: it listens on one port and tells the others another.
    const proxied = parseNodeConfig({ ...minimal, failureDetector: { mode: 'heartbeat', port: 7100, advertisedPort: 17100 } });
    expect(proxied.detector).toEqual({ host: '127.0.0.1', port: 7100, advertisedPort: 17100 });
  });

  it('refuses failure detector settings that cannot work, naming the key', () => {
    const fd = (failureDetector: unknown) => refusal({ ...minimal, failureDetector });
    expect(fd({ heartbeatIntervalMs: 'fast' })).toBe(
      'node.json: failureDetector.heartbeatIntervalMs must be a positive whole number of milliseconds, got fast',
    );
    expect(fd({ leaseMs: -1 })).toBe('node.json: failureDetector.leaseMs must be a positive whole number of milliseconds, got -1');
    expect(fd({ heartbeatIntervalMs: 500, suspicionTimeoutMs: 1000 })).toBe(
      'node.json: failureDetector.suspicionTimeoutMs (1000) must be at least three heartbeats (3 × heartbeatIntervalMs = 1500)',
    );
    expect(fd({ suspicionTimeoutMs: 900, leaseMs: 1000 })).toMatch(
      /^node\.json: failureDetector\.leaseMs \(1000\) must not be longer than the suspicion timeout/,
    );
    expect(fd({ mode: 'swim' })).toBe('node.json: failureDetector.mode must be "session-only" or "heartbeat", got "swim"');
    expect(fd({ lease: 500 })).toBe('node.json: failureDetector.lease is not a known key');
    expect(fd({ port: 70_000 })).toBe('node.json: failureDetector.port must be 0..65535');
    expect(fd({ advertisedPort: 0 })).toBe('node.json: failureDetector.advertisedPort must be 1..65535');
    expect(fd({ advertisedPort: 65_536 })).toBe('node.json: failureDetector.advertisedPort must be 1..65535');
    expect(fd({ advertisedPort: '7100' })).toBe('node.json: failureDetector.advertisedPort must be a port number');
    expect(refusal({ ...minimal, runtime: { failureDetector: { mode: 'heartbeat' } } })).toBe(
      'node.json: runtime.failureDetector is set by "failureDetector" in a node config',
    );
  });

  it('validates every dataset and refuses a dataset named twice', () => {
    const ds = { ref: 'metrics', numShards: 6, minNumNodes: 1, source: { type: 'kafka', topic: 't' } };
    expect(refusal({ ...minimal, datasets: [ds] })).toBe('node.json: datasets.0.numShards must be a power of two between 1 and 65536');
    const good = { ...ds, numShards: 8 };
    expect(refusal({ ...minimal, datasets: [good, good] })).toBe('node.json: datasets name dataset metrics twice');
  });

  it('says when the file is missing or not JSON', async () => {
    const dir = tempDir('shardherd-config-');
    await expect(loadNodeConfig(join(dir, 'none.json'))).rejects.toThrow(/none\.json: cannot be read: ENOENT/);
    await writeFile(join(dir, 'bad.json'), '{ node: 1 ');
    await expect(loadNodeConfig(join(dir, 'bad.json'))).rejects.toThrow(/bad\.json: is not JSON/);
  });
});

describe("a node's weight, checked where the node is made", () => {
  it.each([0, -1, 2_000_000])('a config file with weight %s is refused, naming the key', (weight) => {
    expect(refusal({ ...minimal, weight })).toMatch(/^node\.json: weight must be/);
  });

  it.each([0, -1, Number.NaN])('startNode refuses a config built by hand with weight %s, before it connects to anything', async (weight) => {
    const config = { ...parseNodeConfig(minimal, 'node.json'), weight };
    await expect(startNode(config, { sink: new CountingSink(), log: pino({ level: 'silent' }) })).rejects.toMatchObject({
      code: 'INVALID_PLACEMENT',
      node: 'node-1',
    });
  });

  it.each([0, -1, Number.POSITIVE_INFINITY])('a node built by hand with weight %s is refused by its constructor', (weight) => {
    expect(() => new ShardherdNode({} as ClusterServices, nodeId('n1'), { weight })).toThrow(
      expect.objectContaining({ code: 'INVALID_PLACEMENT', message: expect.stringContaining('n1: weight must be a finite number above 0') }),
    );
  });
});

const SUPPORT = resolve(import.meta.dirname, '../support');

describe('node config: serve', () => {
  it('resolves handler modules against the config file, and keeps host and port', async () => {
    const dir = tempDir('shardherd-config-');
    await mkdir(join(dir, 'handlers'));
    await writeFile(
      join(dir, 'node.json'),
      JSON.stringify({
        ...minimal,
        serve: [
          { dataset: 'metrics', handler: './handlers/m.js', port: 9500, host: '0.0.0.0', advertisedHost: 'node-1.local' },
          { dataset: 'logs', handler: '/abs/l.js' },
        ],
      }),
    );
    const c = await loadNodeConfig(join(dir, 'node.json'));
    expect(c.serve).toEqual([
      { dataset: 'metrics', handler: join(dir, 'handlers/m.js'), port: 9500, host: '0.0.0.0', advertisedHost: 'node-1.local' },
      { dataset: 'logs', handler: '/abs/l.js' },
    ]);
    expect(parseNodeConfig(minimal).serve).toEqual([]);
    expect(parseNodeConfig({ ...minimal, serve: [{ dataset: 'm', handler: 'h.js' }] }, 'x', '/srv/app').serve[0]!.handler).toBe('/srv/app/h.js');
  });

  it('refuses a bad serve entry, naming the key', () => {
    expect(refusal({ ...minimal, serve: [{ dataset: '9x', handler: 'h.js' }] })).toMatch(/^node\.json: serve\.0\.dataset must be a dataset name/);
    expect(refusal({ ...minimal, serve: [{ dataset: 'm' }] })).toBe('node.json: serve.0.handler is required');
    expect(refusal({ ...minimal, serve: [{ dataset: 'm', handler: 'h.js', prot: 1 }] })).toBe('node.json: serve.0.prot is not a known key');
    expect(refusal({ ...minimal, serve: [{ dataset: 'm', handler: 'h.js', port: 70_000 }] })).toMatch(/^node\.json: serve\.0\.port /);
    expect(
      refusal({
        ...minimal,
        serve: [
          { dataset: 'm', handler: 'a.js' },
          { dataset: 'm', handler: 'b.js' },
        ],
      }),
    ).toBe('node.json: serve.1.dataset names dataset m a second time: one handler a dataset');
  });

  it('loads createHandler (given the node id), a named handler or the default export; a dataset not set up is fine', async () => {
    const log = pino({ level: 'silent' });
    const c = parseNodeConfig(
      {
        ...minimal,
        serve: [
          { dataset: 'nowhere', handler: 'shard-echo-handler.mjs' },
          { dataset: 'other', handler: 'default-export-handler.mjs' },
        ],
      },
      'node.json',
      SUPPORT,
    );
    const [echo, byDefault] = await loadServeHandlers(c, log, 'node.json');
    const request = (shard: number) => ({
      dataset: 'nowhere' as DatasetRef,
      shard: shard as ShardNum,
      payload: { q: 1 },
      signal: new AbortController().signal,
    });
    expect(echo!.serve.dataset).toBe('nowhere');
    expect(await echo!.handler(request(3))).toEqual({ node: 'node-1', shard: 3, payload: { q: 1 } });
    expect(await byDefault!.handler(request(5))).toEqual({ shard: 5, by: 'default' });
  });

  it('refuses a missing module or one without a handler, naming the key', async () => {
    const log = pino({ level: 'silent' });
    const load = (handler: string) =>
      loadServeHandlers(parseNodeConfig({ ...minimal, serve: [{ dataset: 'm', handler }] }, 'node.json', SUPPORT), log, 'node.json');
    await expect(load('missing.mjs')).rejects.toThrow(`node.json: serve.0.handler names no file: ${join(SUPPORT, 'missing.mjs')}`);
    await expect(load('no-handler.mjs')).rejects.toThrow(
      /^node\.json: serve\.0\.handler .*no-handler\.mjs exports no handler: a function as its default export, or named "handler" or "createHandler"$/,
    );
    await expect(load('.')).rejects.toBeInstanceOf(NodeConfigError);
  });
});

describe('shardherd node command line', () => {
  it('runs a node with --config, with an optional log level', () => {
    expect(parseCommandLine(['node', '--config', 'c.json'])).toEqual({ kind: 'node', configPath: 'c.json', logLevel: undefined });
    expect(parseCommandLine(['node', '--config', 'c.json', '--log-level', 'debug'])).toMatchObject({ kind: 'node', logLevel: 'debug' });
  });

  it('refuses a node without --config, and demo flags on it', () => {
    const missing = parseCommandLine(['node']);
    expect(missing).toMatchObject({ kind: 'exit', code: EXIT_USAGE });
    expect(missing.kind === 'exit' && missing.stderr).toMatch(/--config <file>/);
    expect(parseCommandLine(['node', '--config', 'c.json', '--nodes', '3'])).toMatchObject({ kind: 'exit', code: EXIT_USAGE });
  });
});
