// Brokers where nothing listens are reported as such: the client's connect names the brokers (not
// a wrong topic prefix) within its connect timeout, and a failed Kafka call of a node or of
// `shardherd topics create` becomes an error naming the brokers and where they were set.
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { anyBrokerAccepts, BrokersUnreachableError, explainUnreachableBrokers } from '../../src/cluster/broker-reach.js';
import { ShardherdClientError } from '../../src/client/client-errors.js';
import { connectKafkaClient } from '../../src/client/kafka-client.js';
import { freePort } from '../support/free-port.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
});

async function listening(): Promise<string> {
  const server = createServer((socket) => socket.destroy());
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `127.0.0.1:${(server.address() as { port: number }).port}`;
}

describe('a client whose brokers cannot be reached', () => {
  it('rejects within its connect timeout naming the brokers, not the topic prefix', async () => {
    const broker = `127.0.0.1:${await freePort()}`;
    const started = Date.now();
    const error = await connectKafkaClient({ brokers: [broker], topicPrefix: 'orders', connectTimeoutMs: 1_500 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    const tookMs = Date.now() - started;
    expect(error).toBeInstanceOf(ShardherdClientError);
    expect((error as ShardherdClientError).code).toBe('CONNECT_FAILED');
    expect((error as Error).message).toBe(
      `no Kafka broker could be reached at ${broker} (the client's brokers): is Kafka running there, and are the addresses right?`,
    );
    expect((error as Error).message).not.toMatch(/prefix/);
    // The connect timeout, and at most a second of connection attempts after it.
    expect(tookMs).toBeLessThan(1_500 + 1_000 + 500);
  });
});

describe('anyBrokerAccepts', () => {
  it('is true when one of the brokers listens, false when none does', async () => {
    const open = await listening();
    const closed = `127.0.0.1:${await freePort()}`;
    expect(await anyBrokerAccepts([closed, open])).toBe(true);
    expect(await anyBrokerAccepts([closed])).toBe(false);
  });
});

describe('explainUnreachableBrokers', () => {
  it('turns a failure while no broker listens into an error naming the brokers and where they were set', async () => {
    const brokers = [`127.0.0.1:${await freePort()}`, `127.0.0.1:${await freePort()}`];
    const failure = new Error('Connection error: connect ECONNREFUSED');
    const error = await explainUnreachableBrokers(brokers, 'kafka.brokers of node.json', () => Promise.reject(failure)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BrokersUnreachableError);
    expect((error as Error).message).toBe(
      `no Kafka broker could be reached at ${brokers.join(', ')} (kafka.brokers of node.json): is Kafka running there, and are the addresses right? (Connection error: connect ECONNREFUSED)`,
    );
    expect((error as Error).cause).toBe(failure);
  });

  it('passes a failure unchanged while a broker listens', async () => {
    const failure = new Error('topic too small');
    await expect(explainUnreachableBrokers([await listening()], 'kafka.brokers', () => Promise.reject(failure))).rejects.toBe(failure);
  });
});
