// Chaos on real processes (docs/ARCHITECTURE.md §9): four `shardherd node` processes on the real Kafka and
// Cassandra, an 8-shard dataset (at most 4 shards a node) fed by a producer of numbered records.
// One fault after the other — SIGKILL the singleton, SIGKILL a shard owner, restart a killed node,
// SIGSTOP the singleton past its session and SIGCONT it — and after each: every shard Active on exactly one live node, the
// singleton recovered every dataset and subscription; at the end every produced record was
// ingested at least once. The simulator gives breadth; these few give the real thing.
import { Kafka, logLevel, type Producer } from 'kafkajs';
import { beforeAll, describe, expect, it } from 'vitest';
import { chaosCluster, chaosTeardown, createTopics } from '../support/chaos-run.js';
import { missingRecords, NumberedProducer } from '../support/numbered-producer.js';
import { converged, waitConverged, type Convergence, type ProcessCluster } from '../support/process-cluster.js';
import { processClusterBase } from './support.js';

const SHARDS = 8;
const DATASET = 'metrics';

describe('chaos: real node processes on real Kafka and Cassandra', () => {
  let dir: string;
  let cluster: ProcessCluster;
  let kafka: Kafka;
  let producer: Producer;
  let numbered: NumberedProducer;
  let last: Convergence;
  const epochs: number[] = [];

  const settle = async (what: string): Promise<Convergence> => {
    const c = await waitConverged(cluster, DATASET, SHARDS, 90_000).catch((e: unknown) => {
      throw new Error(`after ${what}: ${e instanceof Error ? e.message : String(e)}`);
    });
    epochs.push(c.singleton!.status.singleton!.epoch);
    return c;
  };

  /** Every guardian still alive that was a watcher before is one after, and the dataset is still there. */
  const expectRecovered = (before: Convergence, after: Convergence, dead: readonly string[]) => {
    const was = before.singleton!.status.singleton!;
    const now = after.singleton!.status.singleton!;
    expect(now.epoch).toBeGreaterThan(was.epoch);
    expect(now.maps.map((m) => m.dataset)).toEqual(was.maps.map((m) => m.dataset));
    const survivors = was.watchers.filter((w) => !dead.some((d) => w.startsWith(`${d}@`)));
    expect(now.watchers).toEqual(expect.arrayContaining(survivors));
  };

  beforeAll(async () => {
    const base = await processClusterBase('chaos');
    const s = base.services;
    dir = base.dir;
    const topic = `${base.name}.metrics`;
    kafka = new Kafka({ clientId: 'chaos-test', brokers: s.kafkaBrokers, logLevel: logLevel.ERROR });
    await createTopics(kafka, [topic], SHARDS);
    producer = kafka.producer({ allowAutoTopicCreation: false });
    await producer.connect();
    cluster = chaosCluster({
      ...base.options,
      datasets: [{ ref: DATASET, numShards: SHARDS, minNumNodes: 2, source: { type: 'kafka', topic } }],
    });
    // One after the other: join order makes node-1 the oldest member, hence the first singleton.
    for (const n of ['node-1', 'node-2', 'node-3', 'node-4']) await cluster.start(n);
    numbered = new NumberedProducer(producer, topic, SHARDS);
    numbered.start();
  }, 180_000);

  chaosTeardown('chaos', () => ({ numbered, producer, cluster, dir }));

  it('converges: every shard Active on exactly one node, the oldest node is the singleton', async () => {
    // The dataset converges once its first two members run it; the others may reach the
    // singleton's view a moment later on a busy machine.
    const end = Date.now() + 60_000;
    last = await settle('start');
    while (last.singleton!.status.singleton!.members.length < 4 && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 200));
      last = await settle('start');
    }
    expect(last.singleton!.name).toBe('node-1');
    // Each node's config names its rack: it travels in the membership metadata to the singleton's view.
    expect(last.singleton!.status.singleton!.members.map((m) => [m.node, m.rack])).toEqual(
      ['node-1', 'node-2', 'node-3', 'node-4'].map((n) => [n, `rack-${n}`]),
    );
  }, 120_000);

  it('SIGKILL of the singleton: the next oldest recovers the dataset and the subscriptions under a new epoch', async () => {
    const before = last;
    await cluster.kill('node-1');
    last = await settle('killing the singleton');
    expect(last.singleton!.name).toBe('node-2');
    expectRecovered(before, last, ['node-1']);
  }, 120_000);

  it('SIGKILL of a shard owner: its shards become Active elsewhere', async () => {
    const owner = [...last.statuses.values()].find((s) => s.node !== last.singleton!.name && s.running.length > 0)!;
    expect(owner).toBeDefined();
    await cluster.kill(owner.node);
    const after = await settle(`killing the owner ${owner.node}`);
    expect(after.singleton!.status.singleton!.epoch).toBe(last.singleton!.status.singleton!.epoch);
    expect([...after.statuses.keys()]).not.toContain(owner.node);
    last = after;
  }, 120_000);

  it('restarting a killed node: it joins as a new incarnation and the cluster converges', async () => {
    const killed = cluster.get('node-1');
    expect(killed.alive).toBe(false);
    await cluster.start('node-1');
    last = await settle('restarting node-1');
    expect(last.statuses.get('node-1')?.member).toBe(true);
  }, 120_000);

  it('SIGSTOP of the singleton past its session, then SIGCONT: another node takes over and the woken one never acts as singleton again', async () => {
    const frozen = last.singleton!.name;
    const before = last;
    cluster.signal(frozen, 'SIGSTOP');
    // Its membership ends after the session timeout; the survivor takes over meanwhile.
    let taken: Convergence | undefined;
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const c = await converged(cluster, DATASET, SHARDS);
      if (c.ok && c.singleton!.name !== frozen) {
        taken = c;
        break;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(taken, 'no other node took over while the singleton was frozen').toBeDefined();
    expectRecovered(before, taken!, [frozen]);
    cluster.signal(frozen, 'SIGCONT');
    const woken = await waitFor(
      async () => {
        const s = await cluster.status(frozen);
        // It fences itself: a new incarnation, a member again, and no singleton.
        return s && s.incarnation !== before.statuses.get(frozen)!.incarnation && s.member ? s : undefined;
      },
      60_000,
      `${frozen} did not come back as a new incarnation after SIGCONT`,
    );
    expect(woken.singleton).toBeUndefined();
    last = await settle('waking the frozen singleton');
    expect(last.singleton!.name).toBe(taken!.singleton!.name);
    expect(last.singleton!.status.singleton!.epoch).toBe(taken!.singleton!.status.singleton!.epoch);
  }, 180_000);

  it('every record produced during the faults was ingested at least once, and epochs never went back', async () => {
    await numbered.stop();
    const produced = numbered.acked;
    expect(produced.size).toBeGreaterThan(1_000);
    const missing = await missingRecords(produced, () => cluster.ingested(), 60_000);
    expect(missing.slice(0, 20), `${missing.length} of ${produced.size} records never reached a sink`).toEqual([]);
    expect(epochs).toEqual([...epochs].sort((a, b) => a - b));
  }, 120_000);
});

async function waitFor<T>(probe: () => Promise<T | undefined>, timeoutMs: number, message: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(message);
    await new Promise((r) => setTimeout(r, 250));
  }
}
