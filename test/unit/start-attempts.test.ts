// A node start that failed on Kafka answering slowly is tried again, a few times and further apart
// each time; one that failed for a reason time does not fix, or after a wait of its own, fails at once.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { BrokersUnreachableError } from '../../src/cluster/broker-reach.js';
import { KafkaBusError } from '../../src/cluster/kafka-bus.js';
import { NodeConfigError } from '../../src/node/node-config.js';
import { MetaStoreUnavailableError } from '../../src/store/meta-store.js';
import { START_ATTEMPTS, startWithAttempts } from '../../src/node/start-attempts.js';

/** A start that fails with each of `failures` in turn, then succeeds; and what was waited, and logged. */
function flakyStart(failures: readonly unknown[]) {
  let calls = 0;
  const waits: number[] = [];
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  const start = async () => {
    calls += 1;
    if (calls <= failures.length) throw failures[calls - 1];
    return 'started';
  };
  return { start, log, waits, lines, calls: () => calls, wait: async (ms: number) => void waits.push(ms) };
}

const slowBroker = () => new KafkaBusError('KAFKA_FAILED', 'Kafka failed reading the topic configs: Request DescribeConfigs timed out', {}, true);

describe('startWithAttempts', () => {
  it('starts again after a failure Kafka calls retriable, waiting longer each time, and says so in the log', async () => {
    const f = flakyStart([slowBroker(), slowBroker()]);
    await expect(startWithAttempts(f.start, { log: f.log, stopping: () => false, wait: f.wait })).resolves.toBe('started');
    expect(f.calls()).toBe(3);
    expect(f.waits).toEqual([START_ATTEMPTS.firstDelayMs, 2 * START_ATTEMPTS.firstDelayMs]);
    expect(f.lines.map((l) => [l.event, l.attempt])).toEqual([
      ['node.start-retried', 1],
      ['node.start-retried', 2],
    ]);
  });

  it('gives up after its attempts with the last error', async () => {
    const errors = Array.from({ length: START_ATTEMPTS.attempts }, slowBroker);
    const f = flakyStart(errors);
    await expect(startWithAttempts(f.start, { log: f.log, stopping: () => false, wait: f.wait })).rejects.toBe(errors.at(-1));
    expect(f.calls()).toBe(START_ATTEMPTS.attempts);
  });

  it.each([
    ['a config error', new NodeConfigError('kafka.brokers', 'must not be empty')],
    ['brokers out of reach', new BrokersUnreachableError(['127.0.0.1:1'], 'kafka.brokers of node.json', new Error('ECONNREFUSED'))],
    ['a refusal', new KafkaBusError('TOPIC_NOT_ONE_PARTITION', 'topic x has 2 partitions', {}, false)],
    [
      'a MetaStore unreachable through its own connect window',
      new MetaStoreUnavailableError('connect to Cassandra at 127.0.0.1:1 (gave up after 9 attempts in 30000 ms)'),
    ],
  ])('fails at once on %s', async (_what, error) => {
    const f = flakyStart([error]);
    await expect(startWithAttempts(f.start, { log: f.log, stopping: () => false, wait: f.wait })).rejects.toBe(error);
    expect(f.calls()).toBe(1);
    expect(f.waits).toEqual([]);
  });

  it('does not start again once the process was asked to stop', async () => {
    let stopping = false;
    const f = flakyStart([slowBroker(), slowBroker()]);
    const wait = async (ms: number) => {
      f.waits.push(ms);
      stopping = true; // SIGTERM during the wait
    };
    await expect(startWithAttempts(f.start, { log: f.log, stopping: () => stopping, wait })).rejects.toBeInstanceOf(KafkaBusError);
    expect(f.calls()).toBe(1);
  });
});
