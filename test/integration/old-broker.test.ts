// A broker too old for @platformatic/kafka stops what uses it at start with a typed error naming the
// option that avoids it, instead of failing the first fetch or write. The brokers here are
// stand-ins on 127.0.0.1 that answer Kafka's ApiVersions question as old releases do (nothing else):
// Kafka 0.11.0 answers ApiVersions v1 with its ranges (no DeleteGroups, added in 1.1); Kafka 0.10.2
// knows only ApiVersions v0 and refuses the later versions with an answer in v0's layout. The real brokers' answers are checked
// against the same code by every other Kafka test, which would fail were a real broker refused. A
// broker that never answers the question does not stop the source: silence says nothing of versions.
import net from 'node:net';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { ShardedProducer } from '../../src/client/sharded-producer.js';
import { KafkaBus } from '../../src/cluster/kafka-bus.js';
import { KafkaMembership } from '../../src/cluster/kafka-membership.js';
import { validateDatasetConfig } from '../../src/core/dataset-config.js';
import { incarnation, nodeId } from '../../src/core/ids.js';
import { KafkaIngestionSource } from '../../src/ingest/kafka-source.js';

const API_VERSIONS = 18;
const UNSUPPORTED_VERSION = 35;

/** [api key, min version, max version] of Kafka 0.11.0's ApiVersions answer. */
const KAFKA_0_11: readonly (readonly [number, number, number])[] = [
  [0, 0, 3], // Produce
  [1, 0, 5], // Fetch
  [2, 0, 2], // ListOffsets
  [3, 0, 4], // Metadata
  [8, 0, 3], // OffsetCommit
  [9, 0, 3], // OffsetFetch
  [10, 0, 1], // FindCoordinator
  [11, 0, 2], // JoinGroup
  [12, 0, 1], // Heartbeat
  [13, 0, 1], // LeaveGroup
  [14, 0, 1], // SyncGroup
  [15, 0, 1], // DescribeGroups
  [16, 0, 1], // ListGroups
  [17, 0, 0], // SaslHandshake
  [18, 0, 1], // ApiVersions
  [19, 0, 2], // CreateTopics
  [20, 0, 1], // DeleteTopics
  [21, 0, 0], // DeleteRecords
  [22, 0, 0], // InitProducerId
];

/** Kafka 0.10.2's: before idempotent produce (InitProducerId) and before the record batches of Produce v3. */
const KAFKA_0_10_2: readonly (readonly [number, number, number])[] = [
  [0, 0, 2], // Produce
  [1, 0, 3], // Fetch
  [2, 0, 1], // ListOffsets
  [3, 0, 2], // Metadata
  [8, 0, 2], // OffsetCommit
  [9, 0, 2], // OffsetFetch
  [10, 0, 0], // FindCoordinator
  [11, 0, 1], // JoinGroup
  [12, 0, 0], // Heartbeat
  [13, 0, 0], // LeaveGroup
  [14, 0, 0], // SyncGroup
  [15, 0, 0], // DescribeGroups
  [16, 0, 0], // ListGroups
  [17, 0, 0], // SaslHandshake
  [18, 0, 0], // ApiVersions
  [19, 0, 1], // CreateTopics
  [20, 0, 0], // DeleteTopics
];

/** An ApiVersions answer in the v0/v1 layout: error code, [api key, min, max]…, and v1's throttle time. */
function apiVersionsAnswer(correlationId: number, errorCode: number, apis: readonly (readonly [number, number, number])[], withThrottle: boolean): Buffer {
  const body = Buffer.alloc(4 + 2 + 4 + apis.length * 6 + (withThrottle ? 4 : 0));
  let at = body.writeInt32BE(correlationId, 0);
  at = body.writeInt16BE(errorCode, at);
  at = body.writeInt32BE(apis.length, at);
  for (const [key, min, max] of apis) {
    at = body.writeInt16BE(key, at);
    at = body.writeInt16BE(min, at);
    at = body.writeInt16BE(max, at);
  }
  if (withThrottle) body.writeInt32BE(0, at);
  const size = Buffer.alloc(4);
  size.writeInt32BE(body.length);
  return Buffer.concat([size, body]);
}

/**
 * A stand-in broker that answers ApiVersions up to `maxApiVersions` with `apis`, and a higher
 * version with UNSUPPORTED_VERSION in the v0 layout (as Kafka does). Any other request is answered
 * with nothing: the tests never get that far.
 */
async function oldBroker(
  maxApiVersions: number,
  apis: readonly (readonly [number, number, number])[],
): Promise<{ address: string; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 4 && pending.length >= 4 + pending.readInt32BE(0)) {
        const request = pending.subarray(4, 4 + pending.readInt32BE(0));
        pending = pending.subarray(4 + request.length);
        const [key, version, correlationId] = [request.readInt16BE(0), request.readInt16BE(2), request.readInt32BE(4)];
        if (key !== API_VERSIONS) continue;
        socket.write(
          version > maxApiVersions
            ? apiVersionsAnswer(correlationId, UNSUPPORTED_VERSION, [[API_VERSIONS, 0, maxApiVersions]], false)
            : apiVersionsAnswer(correlationId, 0, apis, version >= 1),
        );
      }
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('a broker too old for @platformatic/kafka', () => {
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close().catch(() => undefined);
  });
  const log = pino({ level: 'silent' });

  async function broker(maxApiVersions: number, apis: readonly (readonly [number, number, number])[]): Promise<string> {
    const b = await oldBroker(maxApiVersions, apis);
    closers.push(b.close);
    return b.address;
  }

  it('stops the ingestion source at ready(), naming kafka.client and what the broker lacks', async () => {
    const address = await broker(1, KAFKA_0_11);
    const source = new KafkaIngestionSource({ brokers: [address], clientId: 'old-broker', groupPrefix: 'old', log, client: 'platformatic' });
    closers.push(() => source.close());
    const refused = await source.ready().then(
      () => undefined,
      (e: unknown) => e as Error & { code?: string },
    );
    expect(refused?.code).toBe('UNSUPPORTED_BROKER');
    expect(refused?.message).toContain(`kafka.client "platformatic": @platformatic/kafka cannot work with the broker it asked of ${address}`);
    expect(refused?.message).toContain('DeleteGroups not at all');
    expect(refused?.message).toContain('set kafka.client to "kafkajs"');
    // Fetch v4–v5 is common ground: only what is lacking is named.
    expect(refused?.message).not.toContain('Fetch');
  });

  it('refuses the ShardedProducer’s first write on a broker that knows only ApiVersions v0, naming kafkaClient', async () => {
    const address = await broker(0, KAFKA_0_10_2);
    const producer = new ShardedProducer({ brokers: [address], clientId: 'old-broker', log, kafkaClient: 'platformatic' });
    closers.push(() => producer.close());
    const validated = validateDatasetConfig({ ref: 'old', numShards: 1, minNumNodes: 1, source: { type: 'kafka', topic: 'old' } });
    if (!validated.ok) throw new Error(validated.error.message);
    await expect(producer.send(validated.value, [{ shardKey: { _metric_: 'm' }, partitionKey: { host: 'a' }, value: 1 }])).rejects.toMatchObject({
      code: 'UNSUPPORTED_BROKER',
      message: expect.stringContaining(
        'which serves ApiVersions only v0 (the library asks v1 or later before any request), Produce only v0–v2 (the library speaks v3–v11), InitProducerId not at all (the library speaks v0–v5). @platformatic/kafka needs Kafka 3.5 or later',
      ) as unknown,
    });
  });

  it("refuses the bus's first request (a node's first Kafka call), naming its client option and what the broker lacks", async () => {
    const address = await broker(0, KAFKA_0_10_2);
    const bus = new KafkaBus({ brokers: [address], clientId: 'old-broker', log, client: 'platformatic' });
    closers.push(() => bus.close());
    await expect(bus.ensureTopics(['old.inbox'])).rejects.toMatchObject({
      code: 'UNSUPPORTED_BROKER',
      message: expect.stringMatching(
        /^the bus option client \(kafka\.client in a node config\) "platformatic": @platformatic\/kafka cannot work with the broker .* set the bus option client \(kafka\.client in a node config\) to "kafkajs"/,
      ) as unknown,
    });
  });

  it("refuses the membership's join at once, naming its client option, instead of waiting out the join timeout", async () => {
    const address = await broker(0, KAFKA_0_10_2);
    const membership = new KafkaMembership({
      brokers: [address],
      clientId: 'old-broker',
      topicPrefix: 'old',
      log,
      client: 'platformatic',
      joinTimeoutMs: 30_000,
    });
    closers.push(() => membership.close());
    const started = Date.now();
    await expect(membership.join({ node: nodeId('n1'), incarnation: incarnation('i1') })).rejects.toMatchObject({
      code: 'UNSUPPORTED_BROKER',
      message: expect.stringMatching(
        /^the membership option client \(kafka\.client in a node config\) "platformatic": @platformatic\/kafka cannot work with the broker .*, which serves ApiVersions only v0 .* set the membership option client \(kafka\.client in a node config\) to "kafkajs"/,
      ) as unknown,
    });
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('lets the source start, with a warning, when the broker does not answer the question (it says nothing of its versions)', async () => {
    const sockets = new Set<net.Socket>();
    const silent = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    closers.push(async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => silent.close(resolve));
    });
    const lines: string[] = [];
    const address = `127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
    const source = new KafkaIngestionSource({
      brokers: [address],
      clientId: 'silent-broker',
      groupPrefix: 'silent',
      log: pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) }),
      client: 'platformatic',
    });
    const started = Date.now();
    await expect(source.ready()).resolves.toBeUndefined();
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(lines.some((l) => l.includes('"ingest.broker-versions-unknown"'))).toBe(true);
    for (const s of sockets) s.destroy();
    await source.close();
  }, 30_000);
});
