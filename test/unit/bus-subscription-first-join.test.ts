// A bus subscription's first join on a broker that just started: its group coordinator answers
// "loading" (COORDINATOR_LOAD_IN_PROGRESS, which Kafka calls retriable) until it has read its
// offsets. kafkajs then crashes the consumer and asks the subscription whether to start it again;
// subscribe() used to fail at once. The consumer here plays kafkajs's part: a crash with a
// retriable error asks `restartOnFailure`, reports the crash with its answer, and starts again if told.
import { EventEmitter } from 'node:events';
import type { Kafka } from 'kafkajs';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { RealClock } from '../../src/cluster/clock.js';
import { KafkajsSubscription } from '../../src/cluster/kafka-bus/kafkajs-subscription.js';
import { kafkaBusSettings } from '../../src/cluster/kafka-bus/settings.js';

const TOPIC = 'bus.t';
const EVENTS = { GROUP_JOIN: 'consumer.group_join', CRASH: 'consumer.crash' } as const;

function coordinatorLoading(): Error {
  return Object.assign(new Error('The coordinator is loading and hence can\u2019t process requests'), {
    name: 'KafkaJSProtocolError',
    type: 'COORDINATOR_LOAD_IN_PROGRESS',
    retriable: true,
  });
}

/** A kafkajs consumer whose first `failures` runs crash with a retriable error, then joins owning partition 0. */
function kafkaWhoseJoinFails(failures: number): { kafka: Kafka; runs: () => number } {
  let runs = 0;
  const kafka = {
    consumer(config: { retry: { restartOnFailure: (e: Error) => Promise<boolean> } }) {
      const emitter = new EventEmitter();
      const run = (): void => {
        runs += 1;
        setImmediate(() => {
          if (runs <= failures) {
            const error = coordinatorLoading();
            void config.retry.restartOnFailure(error).then((restart) => {
              emitter.emit(EVENTS.CRASH, { payload: { error, restart } });
              if (restart) setImmediate(run);
            });
          } else {
            emitter.emit(EVENTS.GROUP_JOIN, { payload: { memberAssignment: { [TOPIC]: [0] } } });
          }
        });
      };
      return {
        events: EVENTS,
        on: (event: string, listener: (e: unknown) => void) => emitter.on(event, listener),
        connect: async () => {},
        subscribe: async () => {},
        run: async () => run(),
        disconnect: async () => {},
        pause: () => {},
        resume: () => {},
        seek: () => {},
      };
    },
  };
  return { kafka: kafka as unknown as Kafka, runs: () => runs };
}

const log = pino({ level: 'silent' });

function subscription(kafka: Kafka): KafkajsSubscription {
  return new KafkajsSubscription(kafka, {
    committedOffset: async () => 5,
    onClosed: () => {},
    settings: kafkaBusSettings({ log, brokers: ['127.0.0.1:9092'], clientId: 'test' }),
    log,
    topic: TOPIC,
    group: 'g',
    handler: async () => {},
    onError: undefined,
    skip: undefined,
    startIfUncommitted: 0,
    openedAt: 1,
    fromBeginning: false,
    clock: new RealClock(),
  });
}

describe('a bus subscription whose first join meets a coordinator still loading', () => {
  it('opens once the coordinator answers, after kafkajs restarted the consumer', async () => {
    const { kafka, runs } = kafkaWhoseJoinFails(2);
    const sub = subscription(kafka);
    await expect(sub.open()).resolves.toBeUndefined();
    expect(runs()).toBe(3);
    await sub.close();
  });

  it('fails with the error, marked retriable, when the coordinator is still loading after three restarts', async () => {
    const { kafka, runs } = kafkaWhoseJoinFails(10);
    const sub = subscription(kafka);
    await expect(sub.open()).rejects.toMatchObject({ code: 'KAFKA_FAILED', retriable: true, message: expect.stringContaining('coordinator is loading') });
    expect(runs()).toBe(4);
  });
});
