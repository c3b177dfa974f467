// A node's status port is taken before the node connects to anything: a port another process
// holds fails the start naming `status.port` and the address, and the node never reached Kafka or
// Cassandra (so it never joined). A free port is held, answers "starting", and is the very socket
// the API answers on afterwards.
import { createServer, type Server } from 'node:net';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { holdHttpPort } from '../../src/http/held-port.js';
import { startNodeApi } from '../../src/http/node-api.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import { NodeConfigError, parseNodeConfig } from '../../src/node/node-config.js';
import { startNode } from '../../src/node/run-node.js';
import { StatusPortError } from '../../src/node/status-port.js';
import { SimDriver } from '../../src/sim/driver.js';
import { countingServer } from '../support/counting-server.js';

const closeServer = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));

describe('a node whose status port is taken', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map(closeServer));
  });

  it('fails before it connects to Kafka or Cassandra, naming status.port and the address', async () => {
    const taken = await countingServer();
    const kafka = await countingServer();
    const cassandra = await countingServer();
    servers.push(taken.server, kafka.server, cassandra.server);
    const config = parseNodeConfig(
      {
        node: 'n1',
        kafka: { brokers: [`127.0.0.1:${kafka.port}`] },
        cassandra: { contactPoints: [`127.0.0.1:${cassandra.port}`], connectTimeoutMs: 1_000 },
        status: { port: taken.port },
      },
      'node.json',
    );
    const started = startNode(config, { sink: new CountingSink(), log: pino({ level: 'silent' }), configSource: 'node.json' });
    const error = await started.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(StatusPortError);
    expect(error).toBeInstanceOf(NodeConfigError);
    expect((error as StatusPortError).key).toBe('status.port');
    expect((error as Error).message).toBe(
      `node.json: status.port ${taken.port}: cannot listen on 127.0.0.1:${taken.port}, which is in use by another process (EADDRINUSE); the node did not start and did not join the cluster`,
    );
    // Nothing was asked of the cluster's services: no MetaStore connection, no broker, so no join.
    expect(kafka.connections()).toBe(0);
    expect(cassandra.connections()).toBe(0);
  });
});

describe('a held status port', () => {
  let cluster: EmbeddedCluster;
  let driver: SimDriver;
  beforeAll(async () => {
    // On simulated time: the node's health is its own, not that of a busy machine.
    cluster = new EmbeddedCluster({ name: 'held-port', clock: new SimulatedClock(0), nodes: ['n1'], log: pino({ level: 'silent' }) });
    driver = new SimDriver(cluster);
    await driver.whenSettled(cluster.start());
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it('answers 503 Starting until the API takes it over, then the API answers there; closing the API frees it', async () => {
    const held = await holdHttpPort('127.0.0.1', 0);
    const starting = await fetch(`${held.url}/healthz`);
    expect(starting.status).toBe(503);
    expect(await starting.json()).toEqual({ error: 'Starting', reason: 'the node is still starting: try again' });

    const api = await startNodeApi(cluster.node('n1'), { port: 0, held, token: 'held-port-test-token-123' });
    expect(api.url).toBe(held.url);
    const health = await driver.whenSettled(fetch(`${api.url}/healthz`));
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ ok: true, member: true });

    await api.close();
    const port = Number(new URL(held.url).port);
    // The port is free again: this process can listen on it.
    const again = createServer();
    await new Promise<void>((resolve, reject) => {
      again.once('error', reject);
      again.listen(port, '127.0.0.1', resolve);
    });
    await closeServer(again);
  });
});
