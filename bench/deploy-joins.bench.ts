/**
 * Joins and rebalances of the control plane on each Kafka client library, in one process against
 * the real Kafka: a bus subscription (the first of its group), a second subscription of the same
 * group (a node's replies after its events: the first one's group rebalances), and three
 * membership handles joining one after another (each join a rebalance of the others). Wall ms per
 * step, medians over rounds that alternate the libraries; both libraries are loaded before the
 * first round, so no round pays for loading one.
 */
import { pino } from 'pino';
import { KafkaBus } from '../src/cluster/kafka-bus.js';
import { KafkaMembership } from '../src/cluster/kafka-membership.js';
import { KAFKA_CLIENT_LIBRARIES, type KafkaClientLibrary } from '../src/cluster/kafka-options.js';
import { loadPlatformaticKafka } from '../src/cluster/platformatic-kafka.js';
import { incarnation, nodeId } from '../src/core/ids.js';
import { ms, quantile, register, type Table } from './harness.js';
import { withRealServices } from './real-services.js';

const ROUNDS = 5;
const SESSION_TIMEOUT_MS = 3_000;
const MEMBERS = 3;

interface Round {
  readonly firstSubscription: number;
  readonly secondSubscription: number;
  readonly memberJoins: number[];
}

async function round(brokers: string[], client: KafkaClientLibrary): Promise<Round> {
  const log = pino({ level: 'silent' });
  const prefix = `joins_${client}_${Date.now().toString(36)}`;
  const bus = new KafkaBus({ brokers, clientId: prefix, log, client, sessionTimeoutMs: SESSION_TIMEOUT_MS });
  const members = Array.from(
    { length: MEMBERS },
    (_, i) => new KafkaMembership({ brokers, clientId: `${prefix}-${i}`, topicPrefix: prefix, log, client, sessionTimeoutMs: SESSION_TIMEOUT_MS }),
  );
  try {
    await bus.ensureTopics([`${prefix}.events`, `${prefix}.replies`]);
    const timed = async (step: () => Promise<unknown>): Promise<number> => {
      const t = performance.now();
      await step();
      return performance.now() - t;
    };
    const firstSubscription = await timed(() => bus.subscribe(`${prefix}.events`, `${prefix}.node`, () => {}));
    const secondSubscription = await timed(() => bus.subscribe(`${prefix}.replies`, `${prefix}.node`, () => {}));
    const memberJoins: number[] = [];
    for (const [i, m] of members.entries()) memberJoins.push(await timed(() => m.join({ node: nodeId(`n${i}`), incarnation: incarnation(`i${i}`) })));
    return { firstSubscription, secondSubscription, memberJoins };
  } finally {
    await Promise.all(members.map((m) => m.close()));
    await bus.close();
  }
}

register({
  name: 'deploy-joins',
  run: async (): Promise<Table> =>
    withRealServices(async (s) => {
      await loadPlatformaticKafka();
      const rounds = new Map<KafkaClientLibrary, Round[]>(KAFKA_CLIENT_LIBRARIES.map((c) => [c, []]));
      for (let i = 0; i < ROUNDS; i++) for (const client of KAFKA_CLIENT_LIBRARIES) rounds.get(client)!.push(await round(s.kafkaBrokers, client));
      const rows: (string | number)[][] = [];
      const row = (client: string, what: string, xs: number[]) => [client, what, ms(quantile(xs, 0.5)), ms(Math.min(...xs)), ms(Math.max(...xs)), xs.length];
      for (const [client, rs] of rounds) {
        rows.push(
          row(
            client,
            'bus subscribe, first of its group',
            rs.map((r) => r.firstSubscription),
          ),
        );
        rows.push(
          row(
            client,
            'bus subscribe, second of the group (the first rebalances)',
            rs.map((r) => r.secondSubscription),
          ),
        );
        for (let m = 0; m < MEMBERS; m++)
          rows.push(
            row(
              client,
              `membership join of member ${m + 1} (${m} already in)`,
              rs.map((r) => r.memberJoins[m]!),
            ),
          );
      }
      return {
        title: `Joins and rebalances on each client library (session ${SESSION_TIMEOUT_MS} ms, heartbeats every tenth of it), ${ROUNDS} rounds`,
        columns: ['kafka.client', 'step', 'median', 'min', 'max', 'rounds'],
        rows,
        notes: ['Wall ms of each step in one process; the broker is the one of the benchmark run (group.initial.rebalance.delay.ms 0).'],
      };
    }),
});
