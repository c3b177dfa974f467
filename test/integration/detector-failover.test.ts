// The failure detector on real processes (docs/ARCHITECTURE.md §11): four `shardherd node`
// processes in `heartbeat` mode on the real Kafka and Cassandra, an 8-shard dataset fed by a
// producer of numbered records. SIGKILL of a shard owner: its shards are Active elsewhere within a
// silent node's eviction (its refused port is no proof) and the reassignment, long before the Kafka
// session would have noticed; SIGKILL of the
// singleton: a new singleton answers and the dead node's shards are served again within the
// singleton's bound; at the end every acknowledged record reached a sink.
import { Kafka, logLevel, type Producer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DRIFT_FACTOR,
  FAILURE_DETECTOR_DEFAULTS,
  lateAfterMs,
  leaseWaitMs,
  probePeriodMs,
  quorumSilenceMs,
} from '../../src/cluster/failure-detector/settings.js';
import { CHAOS_RUNTIME, chaosTeardown, createTopics } from '../support/chaos-run.js';
import { departures, MapWatch, singletonAnswers, singletonOf, until, type WatchedDataset } from '../support/failover-run.js';
import { missingRecords, NumberedProducer } from '../support/numbered-producer.js';
import { converged, ProcessCluster, waitConverged } from '../support/process-cluster.js';
import { processClusterBase } from './support.js';

const NODES = ['node-1', 'node-2', 'node-3', 'node-4'];
/** At most 4 shards a node (minNumNodes 2): two owners and two spares, so each lost node's shards all have somewhere to go. */
const DATASET: WatchedDataset = { ref: 'metrics', numShards: 8, replicationFactor: 1 };
/**
 * The node config's default session: far above the detector's bound, so shards that move within
 * that bound were moved by the detector, not by the group.
 */
const SESSION_TIMEOUT_MS = 10_000;
/**
 * From the detector's eviction to the shards Active elsewhere: the singleton's reassignment, the
 * map on the events topic, the new owner's Kafka consumer joining and its first fetch, its Active
 * report, the map published again; a few hundred ms on an idle machine, a few seconds with both
 * cores shared by the brokers, the database and four node processes.
 */
const REASSIGNMENT_SLACK_MS = 4_000;
/**
 * SIGKILL of an owner → its shards Active elsewhere. A killed process's connections close at once
 * (§11.3), which starts its probes, but a refusal is no proof (§11.5): it is evicted as a silent
 * node is, once a majority has failed to reach it for ⅔ of the suspicion timeout and a heartbeat
 * (after ¾ of it of silence, and its lease), with three rounds of probes for lost votes; then
 * reassigned. (The nodes start together, long enough before the kill for their join grace to end.)
 */
const d = FAILURE_DETECTOR_DEFAULTS;
const OWNER_EVICTION_MS = Math.max(lateAfterMs(d) + quorumSilenceMs(d), leaseWaitMs(d)) + 3 * probePeriodMs(d);
const OWNER_FAILOVER_BOUND_MS = OWNER_EVICTION_MS + REASSIGNMENT_SLACK_MS;
/**
 * How long a dead singleton goes unnoticed: at most its own lease in the MetaStore (§11.9), the next
 * in line taking over once it saw no renewal for that long; its refused endpoint is no proof and
 * shortens nothing. (The new singleton reads the inbox in a consumer group of its own epoch: the
 * dead one's Kafka session holds nothing up.)
 */
const SINGLETON_DETECTION_MS = FAILURE_DETECTOR_DEFAULTS.singletonLeaseMs;
/**
 * A new singleton's recovery: its lease by compare-and-set, the MetaStore read, every member's
 * answer (at most `recoveryReplyTimeoutMs`), and not before its predecessor's node leases ran out.
 */
const RECOVERY_SLACK_MS = CHAOS_RUNTIME.recoveryReplyTimeoutMs + 3_000;
/** SIGKILL of the singleton → a new singleton answers; its node's shards are Active elsewhere within the reassignment after that. */
const SINGLETON_FAILOVER_BOUND_MS = Math.ceil(SINGLETON_DETECTION_MS * DRIFT_FACTOR) + RECOVERY_SLACK_MS;
const SINGLETON_SHARDS_BOUND_MS = SINGLETON_FAILOVER_BOUND_MS + REASSIGNMENT_SLACK_MS;

describe('failure detector: real node processes in heartbeat mode on real Kafka and Cassandra', () => {
  let dir: string;
  let cluster: ProcessCluster;
  let producer: Producer;
  let numbered: NumberedProducer;
  let watch: MapWatch | undefined;

  beforeAll(async () => {
    const base = await processClusterBase('detector');
    const s = base.services;
    dir = base.dir;
    const name = base.name;
    const topic = `${name}.metrics`;
    const kafka = new Kafka({ clientId: 'detector-test', brokers: s.kafkaBrokers, logLevel: logLevel.ERROR });
    await createTopics(kafka, [topic], DATASET.numShards);
    producer = kafka.producer({ allowAutoTopicCreation: false });
    await producer.connect();
    cluster = new ProcessCluster({
      ...base.options,
      sessionTimeoutMs: SESSION_TIMEOUT_MS,
      runtime: CHAOS_RUNTIME,
      // The detector's default timings: the bounds above are derived from them.
      failureDetector: { mode: 'heartbeat' },
      datasets: [{ ref: DATASET.ref, numShards: DATASET.numShards, minNumNodes: 2, source: { type: 'kafka', topic } }],
    });
    // All at once: which node is the singleton does not matter here, and the start is the slow part.
    await Promise.all(NODES.map((n) => cluster.start(n)));
    numbered = new NumberedProducer(producer, topic, DATASET.numShards);
    numbered.start();
    watch = await MapWatch.connect(s.kafkaBrokers, name, [DATASET]);
  }, 180_000);

  chaosTeardown('detector-failover', () => ({ numbered, producer, cluster, dir }));
  afterAll(async () => watch?.close());

  it('SIGKILL of an owner: the detector evicts it and its shards are Active elsewhere within a silent node’s eviction and the reassignment', async () => {
    const c = await waitConverged(cluster, DATASET.ref, DATASET.numShards, 90_000);
    const victim = [...c.statuses.values()].find((st) => st.node !== c.singleton!.name && st.running.length > 0)!.node;
    const shards = watch!.shardsOn(victim);
    expect(shards.get(DATASET.ref)!.length).toBeGreaterThan(0);
    await cluster.kill(victim);
    const killed = performance.now();
    const served = Math.round((await until(`${victim}'s shards Active elsewhere`, () => watch!.replaced(shards, victim), 3 * SESSION_TIMEOUT_MS)) - killed);
    expect(served, 'ms from the kill until its shards were Active elsewhere').toBeLessThan(OWNER_FAILOVER_BOUND_MS);
    // The detector's doing: the singleton logged the eviction, with the refused connection among the evidence
    // (its log reaches the file through a pipe: give the line a moment).
    const evictions = () => departures(cluster, [c.singleton!.name]).then((d) => d.evicted);
    await until('the eviction in the singleton’s log', async () => (await evictions()).length > 0, 5_000, 100).catch(() => undefined);
    const evicted = await evictions();
    expect(evicted.map((e) => e.member)).toEqual([victim]);
    expect(evicted[0]!.refused).toBe(true);
  }, 120_000);

  it('SIGKILL of the singleton: a new singleton answers at a higher epoch, and its node’s shards are Active elsewhere, within the singleton’s bound', async () => {
    const c = await waitConverged(cluster, DATASET.ref, DATASET.numShards, 90_000);
    const old = (await singletonOf(cluster))!;
    expect(old.name).toBe(c.singleton!.name);
    const via = NODES.find((n) => n !== old.name && cluster.get(n).alive)!;
    const shards = watch!.shardsOn(old.name);
    await cluster.kill(old.name);
    const killed = performance.now();
    const [answered, served] = await Promise.all([
      singletonAnswers(cluster, via, 3 * SINGLETON_FAILOVER_BOUND_MS),
      until(`${old.name}'s shards Active elsewhere`, () => watch!.replaced(shards, old.name), 3 * SINGLETON_SHARDS_BOUND_MS),
    ]);
    expect(Math.round(answered - killed), 'ms from the kill until a new singleton answered').toBeLessThan(SINGLETON_FAILOVER_BOUND_MS);
    expect(Math.round(served - killed), 'ms from the kill until its shards were Active elsewhere').toBeLessThan(SINGLETON_SHARDS_BOUND_MS);
    const now = await singletonOf(cluster);
    expect(now?.name).not.toBe(old.name);
    expect(now!.epoch).toBeGreaterThan(old.epoch);
    // Every shard on exactly one live node, the one the map names.
    const after = await waitConverged(cluster, DATASET.ref, DATASET.numShards, 30_000);
    expect(after.statuses.has(old.name)).toBe(false);
  }, 120_000);

  it('every record produced across both failovers reached a sink', async () => {
    await numbered.stop();
    // The producer ran through both failovers (a few seconds in all now that neither waits for a session).
    expect(numbered.acked.size).toBeGreaterThan(200);
    const missing = await missingRecords(numbered.acked, () => cluster.ingested(), 60_000);
    expect(missing.slice(0, 20), `${missing.length} of ${numbered.acked.size} records never reached a sink`).toEqual([]);
    expect((await converged(cluster, DATASET.ref, DATASET.numShards)).ok).toBe(true);
  }, 90_000);
});
