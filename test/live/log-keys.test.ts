// A node's JSON log lines carry each key once (a line with `node` twice is ambiguous to every log
// tool), and kafkajs's routine rebalance chatter is logged at debug, not as warnings.
import { Writable } from 'node:stream';
import { logLevel } from 'kafkajs';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { kafkaLogLevel } from '../../src/cluster/kafka-client.js';

const lines: string[] = [];
const sink = new Writable({
  write(chunk, _enc, done) {
    lines.push(...String(chunk).split('\n').filter(Boolean));
    done();
  },
});
let cluster: EmbeddedCluster | undefined;

afterAll(async () => {
  await cluster?.stop();
});

const count = (line: string, key: string) => line.split(`"${key}":`).length - 1;

describe('log lines', () => {
  it('name the node once, whether the process logger carries it (shardherd node) or not (embedded)', async () => {
    // As `shardherd node` makes its logger: the node in the base bindings.
    const log = pino({ level: 'info', base: { node: 'n1', pid: 1 } }, sink);
    cluster = new EmbeddedCluster({ name: `logs-${Date.now()}`, nodes: ['n1'], log });
    await cluster.start();
    await cluster.setupDataset({ ref: 'metrics', numShards: 2, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 10 } });
    await cluster.stop();
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) expect(count(line, 'node'), line).toBe(1);
    expect(lines.some((l) => JSON.parse(l).incarnation !== undefined)).toBe(true);
  });

  it('routes kafkajs rebalance and heartbeat chatter to debug and keeps real errors', () => {
    expect(
      kafkaLogLevel(logLevel.ERROR, '[Connection] Response Heartbeat(key: 12, version: 3)', {
        error: 'The group is rebalancing, so a rejoin is needed',
        type: 'REBALANCE_IN_PROGRESS',
      }),
    ).toBe('debug');
    expect(kafkaLogLevel(logLevel.ERROR, '[Runner] The group is rebalancing, re-joining')).toBe('debug');
    expect(kafkaLogLevel(logLevel.WARN, '[Consumer] Restarting the consumer in 300ms')).toBe('debug');
    expect(kafkaLogLevel(logLevel.ERROR, '[Connection] Connection error: connect ECONNREFUSED 127.0.0.1:9092')).toBe('warn');
    expect(kafkaLogLevel(logLevel.WARN, '[BrokerPool] Failed to connect to seed broker')).toBe('info');
    expect(kafkaLogLevel(logLevel.INFO, '[Consumer] Starting')).toBe('debug');
  });
});
