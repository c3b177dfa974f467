/**
 * Every copy holds every record, on real Kafka and Cassandra: four `shardherd node` processes (each
 * in a rack of its own, each with its own JSON-lines sink), one `balanced` dataset of a Kafka topic
 * of 8 partitions at RF 2 and then RF 3, a producer writing numbered records the whole time. Each
 * cycle SIGKILLs one node (its copies are re-created on the others at once: the dataset has no
 * replacement delay, `replacementDelayMs: 0`, as this follows re-created copies), waits until every copy is
 * Active again, restarts it (a new incarnation of the same node id: the balanced strategy moves its
 * share back, as planned moves) and waits again. After the cycles the producer stops and the copies
 * catch up. Then, per copy in the final map (node, shard): the offsets its node's sink received
 * against the partition's offsets from the copy's start (the earliest offset: `copyStartFrom`'s
 * default): lost (goal 0) and duplicates (at-least-once replays after a crash).
 *
 * `SHARDHERD_EVERY_COPY_CYCLES` (default 2) sets the cycles per replication factor.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { createTopics } from '../test/support/chaos-run.js';
import { NumberedProducer } from '../test/support/numbered-producer.js';
import { everyCopyActive, ProcessCluster, type SinkLine } from '../test/support/process-cluster.js';
import { register, type Table } from './harness.js';
import { sleep, waitFor } from './runtime-support.js';
import { withRealServices, type BenchServices } from './real-services.js';

const NODES = ['copy-1', 'copy-2', 'copy-3', 'copy-4'];
const SHARDS = 8;
const DATASET = 'events';
const CYCLES = Number(process.env.SHARDHERD_EVERY_COPY_CYCLES ?? 2);

interface CaseResult {
  readonly rf: number;
  readonly cycles: number;
  readonly produced: number;
  readonly copies: number;
  readonly expected: number;
  readonly received: number;
  readonly lost: number;
  readonly duplicates: number;
  readonly copiesWithLoss: number;
  readonly worstCopy: string;
  readonly crashToActiveS: number[];
  readonly restartToActiveS: number[];
}

async function runCase(s: BenchServices, rf: number): Promise<CaseResult> {
  const dir = await mkdtemp(join(tmpdir(), 'shardherd-every-copy-'));
  const name = `copies_${Date.now().toString(36)}_rf${rf}`;
  const topic = `${name}.records`;
  const kafka = new Kafka({ clientId: 'every-copy-bench', brokers: s.kafkaBrokers, logLevel: logLevel.ERROR });
  await createTopics(kafka, [topic], SHARDS);
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const cluster = new ProcessCluster({
    dir,
    cluster: name,
    ...s, // the real Kafka and Cassandra
    keyspace: 'shardherd_bench',
    sessionTimeoutMs: 3_000,
    heartbeatIntervalMs: 500,
    runtime: {
      publishIntervalMs: 1_000,
      reportResendMs: 500,
      recoveryReplyTimeoutMs: 2_000,
      pollIntervalMs: 50,
      reassignmentCooldownMs: 0,
      checkpointIntervalMs: 500,
    },
    datasets: [
      {
        ref: DATASET,
        numShards: SHARDS,
        minNumNodes: 1,
        replicationFactor: rf,
        strategy: 'balanced',
        maxConcurrentMoves: 4,
        replacementDelayMs: 0,
        source: { type: 'kafka', topic },
      },
    ],
  });
  const numbered = new NumberedProducer(producer, topic, SHARDS);
  const copies = SHARDS * rf;
  /** Copies the first node's map gives `node` (that node never dies here). */
  const copiesOf = async (node: string): Promise<number | undefined> => {
    const v = await cluster.datasetView(NODES[0]!, DATASET, 10_000);
    return v?.shards.reduce((n, sh) => n + sh.owners.filter((o) => o.node === node).length, 0);
  };
  const crashToActiveS: number[] = [];
  const restartToActiveS: number[] = [];
  try {
    for (const n of NODES) await cluster.start(n, 120_000);
    await waitFor(`RF ${rf}: every copy Active`, () => everyCopyActive(cluster, DATASET, copies), 180_000, 200);
    numbered.start();
    await sleep(2_000);
    for (let cycle = 0; cycle < CYCLES; cycle++) {
      // Never the oldest node: the singleton moving is another benchmark's subject.
      const victim = NODES[1 + (cycle % (NODES.length - 1))]!;
      let t = Date.now();
      await cluster.kill(victim);
      // Over once the survivors' map holds none of the victim's copies and every copy is Active
      // again (right after the kill the maps still show its copies Active).
      await waitFor(
        `RF ${rf}: copies re-created after ${victim} died`,
        async () => (await copiesOf(victim)) === 0 && (await everyCopyActive(cluster, DATASET, copies)),
        180_000,
        200,
      );
      crashToActiveS.push((Date.now() - t) / 1000);
      await sleep(2_000);
      t = Date.now();
      await cluster.start(victim, 120_000);
      await waitFor(
        `RF ${rf}: ${victim} holds copies again`,
        async () => {
          const st = await cluster.status(victim, 5_000);
          const mine = st?.runningCounts[DATASET]?.Active ?? 0;
          return mine > 0 && (await copiesOf(victim)) === mine && (await everyCopyActive(cluster, DATASET, copies));
        },
        180_000,
        200,
      );
      restartToActiveS.push((Date.now() - t) / 1000);
      await sleep(2_000);
    }
    await numbered.stop();
    const produced = numbered.acked.size;

    // The partitions' ends, and every copy caught up to them.
    const admin = kafka.admin();
    await admin.connect();
    const ends = new Map((await admin.fetchTopicOffsets(topic)).map((p) => [p.partition, Number(p.high)]));
    const lows = new Map((await admin.fetchTopicOffsets(topic)).map((p) => [p.partition, Number(p.low)]));
    await admin.disconnect();
    const view = async () => (await cluster.datasetView(NODES[0]!, DATASET, 10_000))!;
    const received = async () => {
      const byCopy = new Map<string, number[]>();
      for (const n of NODES) {
        const text = await readFile(cluster.sinkPath(n), 'utf8').catch(() => '');
        for (const line of text.split('\n')) {
          if (line === '') continue;
          const r = JSON.parse(line) as SinkLine;
          if (r.dataset !== DATASET) continue;
          const key = `${n}/${r.shard}`;
          const list = byCopy.get(key);
          if (list) list.push(r.offset);
          else byCopy.set(key, [r.offset]);
        }
      }
      return byCopy;
    };
    let byCopy = new Map<string, number[]>();
    const holders = (v: Awaited<ReturnType<typeof view>>) => v.shards.flatMap((sh) => sh.owners.map((o) => ({ node: o.node, shard: sh.shard })));
    await waitFor(
      `RF ${rf}: every copy caught up to the partitions' ends`,
      async () => {
        byCopy = await received();
        return holders(await view()).every(({ node, shard }) => new Set(byCopy.get(`${node}/${shard}`) ?? []).size >= ends.get(shard)! - lows.get(shard)!);
      },
      60_000,
      500,
    ).catch(() => undefined); // what is missing then is counted below as lost

    let expected = 0;
    let got = 0;
    let lost = 0;
    let duplicates = 0;
    let copiesWithLoss = 0;
    let worst = { copy: '-', lost: 0 };
    const final = holders(await view());
    for (const { node, shard } of final) {
      const offsets = byCopy.get(`${node}/${shard}`) ?? [];
      const distinct = new Set(offsets);
      // The copy's start: the earliest offset of the partition (copyStartFrom's default), here 0.
      const from = lows.get(shard)!;
      const end = ends.get(shard)!;
      let missing = 0;
      for (let o = from; o < end; o++) if (!distinct.has(o)) missing++;
      expected += end - from;
      got += distinct.size;
      lost += missing;
      duplicates += offsets.length - distinct.size;
      if (missing > 0) copiesWithLoss++;
      if (missing > worst.lost) worst = { copy: `${node}/${shard}`, lost: missing };
    }
    return {
      rf,
      cycles: CYCLES,
      produced,
      copies: final.length,
      expected,
      received: got,
      lost,
      duplicates,
      copiesWithLoss,
      worstCopy: worst.lost > 0 ? `${worst.copy}: ${worst.lost}` : '-',
      crashToActiveS,
      restartToActiveS,
    };
  } finally {
    await numbered.stop().catch(() => undefined);
    await producer.disconnect().catch(() => undefined);
    await cluster.stopAll();
    await rm(dir, { recursive: true, force: true });
  }
}

const seconds = (xs: readonly number[]) => xs.map((x) => x.toFixed(1)).join(', ');

register({
  name: 'every-copy',
  async run(): Promise<Table> {
    const results = await withRealServices(async (s) => {
      const out: CaseResult[] = [];
      for (const rf of [2, 3]) out.push(await runCase(s, rf));
      return out;
    });
    return {
      title: `Every copy's records after crash, restart and move cycles (real Kafka and Cassandra, ${NODES.length} node processes, ${SHARDS} partitions)`,
      columns: [
        'RF',
        'cycles',
        'records produced',
        'copies',
        'offsets expected (Σ copies)',
        'distinct received',
        'lost',
        'copies with loss',
        'duplicates',
        'crash → all Active (s)',
        'restart → all Active (s)',
      ],
      rows: results.map((r) => [
        r.rf,
        r.cycles,
        r.produced,
        r.copies,
        r.expected,
        r.received,
        r.lost,
        r.copiesWithLoss,
        r.duplicates,
        seconds(r.crashToActiveS),
        seconds(r.restartToActiveS),
      ]),
      notes: [
        "lost: offsets of a partition from the copy's start (the earliest offset) to the partition's end that its node's sink never received; goal 0.",
        "duplicates: records a node's sink received more than once for a copy (replays after a crash: at least once).",
        ...results.filter((r) => r.lost > 0).map((r) => `RF ${r.rf}: worst copy ${r.worstCopy}`),
      ],
    };
  },
});
