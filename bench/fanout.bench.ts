/**
 * Event fan-out from the singleton to N local subscribers spread evenly over 5 nodes, on a real
 * clock: one `StopShards` of one shard makes the singleton publish exactly one event (`ShardDown`),
 * as one bus record addressed to every subscriber; each node's guardian routes it to its local
 * subscribers. Measured from the singleton producing that record to the last subscriber receiving
 * the event. Baseline, in the same run: N plain calls of the same subscriber functions with the
 * same message object.
 */
import type { Deliver } from '../src/actors/node-hub.js';
import type { ShardherdNode } from '../src/actors/node-process.js';
import { type DatasetRef, epoch, nodeId, shardNum, ShardEvents, type SubscriberId, type SubscriberMessage } from '../src/index.js';
import { ms, quantile, register, sample, type Table } from './harness.js';
import { ObservedCluster, waitFor } from './runtime-support.js';

const NODES = 5;
const SUBSCRIBER_COUNTS = [1, 100, 1_000] as const;
const SHARDS = 128;
const WARMUP = 3;
const SAMPLES = 30;
const DATASET = 'fan' as DatasetRef;
const SETTINGS = { publishIntervalMs: 60_000, pollIntervalMs: 1_000 } as const;

interface Sample {
  /** The singleton produced the event's record → the last subscriber received it. */
  readonly publishToLast: number;
  readonly publishToFirst: number;
  /** `request(StopShards)` called → the last subscriber received the event. */
  readonly requestToLast: number;
  /** Records the change put on the bus, and how many of them carried the event. */
  readonly records: number;
  readonly eventRecords: number;
  readonly addressees: number;
}

/** What every subscriber function shares: which shard's ShardDown counts, and when it arrived. */
const probe = { shard: -1, expected: 0, received: 0, firstAt: 0, lastAt: 0, snapshots: 0 };

/** One subscriber's function: it counts the awaited event (and times the first and the last). */
function subscriberFunction(): Deliver {
  return (m: SubscriberMessage) => {
    if (m.type === 'CurrentShardSnapshot') probe.snapshots += 1;
    else if (m.type === 'StampedShardEvent' && m.event.type === 'ShardDown' && m.event.shard === probe.shard) {
      const now = performance.now();
      if (++probe.received === 1) probe.firstAt = now;
      if (probe.received === probe.expected) probe.lastAt = now;
    }
  };
}

async function cluster(n: number): Promise<{ oc: ObservedCluster; delivers: Deliver[]; requester: ShardherdNode }> {
  const oc = new ObservedCluster({ name: `fanout-${n}`, nodes: NODES, sessionTimeoutMs: 3_000, heartbeatIntervalMs: 500, settings: SETTINGS });
  const c = oc.cluster;
  await c.start();
  await waitFor('the singleton', async () => (await (await c.singletonNode())?.singletonState()) !== undefined, 10_000);
  const reply = await c.setupDataset({ ref: DATASET, numShards: SHARDS, minNumNodes: NODES, source: { type: 'synthetic', recordsPerSecond: 1 } });
  if (reply.type !== 'DatasetVerified') throw new Error(`SetupDataset: ${reply.type}`);
  await waitFor(
    'every shard Active',
    async () => {
      const s = await (await c.singletonNode())?.singletonState();
      return s?.datasets.get(DATASET)?.mapper.activeShards().length === SHARDS;
    },
    30_000,
    20,
  );

  // N subscribers, spread evenly over the nodes; each subscribes and gets a snapshot first.
  probe.snapshots = 0;
  const delivers: Deliver[] = [];
  for (let i = 0; i < n; i++) {
    const node = c.nodes[i % NODES]!;
    const d = subscriberFunction();
    delivers.push(d);
    const id: SubscriberId = node.registerSubscriber(d);
    node.tell({ type: 'Subscribe', subscriber: id, dataset: DATASET });
  }
  await waitFor('every subscriber’s snapshot', () => probe.snapshots >= n, 60_000, 10);
  await oc.quiet(30_000, 300, 5);
  return { oc, delivers, requester: c.nodes[1]! };
}

/** Stops one shard and times the event's way to every subscriber. */
async function change(oc: ObservedCluster, requester: ShardherdNode, n: number, shard: number): Promise<Sample> {
  Object.assign(probe, { shard, expected: n, received: 0, firstAt: 0, lastAt: 0 });
  let publishedAt: number | undefined;
  let records = 0;
  let eventRecords = 0;
  let addressees = 0;
  oc.onProduce = (p) => {
    records += 1;
    const v = p.value as { kind?: string; to?: readonly string[]; message?: SubscriberMessage };
    if (v.kind === 'publish' && v.message?.type === 'StampedShardEvent' && v.message.event.type === 'ShardDown' && v.message.event.shard === shard) {
      eventRecords += 1;
      addressees = v.to?.length ?? 0;
      publishedAt ??= p.at;
    }
  };
  const sentAt = performance.now();
  const reply = await requester.request((replyTo) => ({ type: 'StopShards', dataset: DATASET, shards: [shard], replyTo }));
  if (reply.type !== 'Success') throw new Error(`StopShards ${shard}: ${reply.type}`);
  await waitFor('every subscriber to get the event', () => probe.received >= n, 10_000, 1);
  await oc.quiet(10_000, 50, 5);
  oc.onProduce = undefined;
  if (probe.received !== n) throw new Error(`${probe.received} deliveries for ${n} subscribers`);
  return {
    publishToLast: probe.lastAt - publishedAt!,
    publishToFirst: probe.firstAt - publishedAt!,
    requestToLast: probe.lastAt - sentAt,
    records: records - 1, // the request itself is a record on the inbox
    eventRecords,
    addressees,
  };
}

async function fanout(): Promise<Table> {
  const rows: (string | number)[][] = [];
  for (const n of SUBSCRIBER_COUNTS) {
    const { oc, delivers, requester } = await cluster(n);
    const samples: Sample[] = [];
    for (let i = 0; i < WARMUP + SAMPLES; i++) {
      const s = await change(oc, requester, n, i);
      if (i >= WARMUP) samples.push(s);
    }
    for (const node of oc.cluster.nodes) node.crash();

    // The same subscriber functions, called directly with one message object, N calls in a loop;
    // the loop runs `reps` times per timed sample (about 100 000 calls) and the time is divided.
    const reps = Math.max(1, Math.floor(100_000 / n));
    const message: SubscriberMessage = {
      type: 'StampedShardEvent',
      epoch: epoch(1),
      version: 1,
      event: ShardEvents.shardDown(DATASET, shardNum(0), nodeId('n01')),
    };
    const base = sample(
      () => {
        for (let r = 0; r < reps; r++) {
          Object.assign(probe, { shard: 0, expected: n, received: 0, firstAt: 0, lastAt: 0 });
          for (const d of delivers) d(message);
        }
        return probe.received;
      },
      { warmup: 5, warmupMs: 500, minSamples: 20, maxSamples: 200, budgetMs: 300, capMs: 5_000 },
    );
    if (base.last !== n) throw new Error('the baseline did not reach every subscriber');
    const perLoop = base.times.map((t) => t / reps);

    const col = (f: (s: Sample) => number) => samples.map(f);
    const last = col((s) => s.publishToLast);
    const baseMed = quantile(perLoop, 0.5);
    rows.push([
      n,
      NODES,
      samples.length,
      ms(quantile(last, 0.5)),
      ms(quantile(last, 0.9)),
      ms(
        quantile(
          col((s) => s.publishToFirst),
          0.5,
        ),
      ),
      ms(
        quantile(
          col((s) => s.requestToLast),
          0.5,
        ),
      ),
      ms(
        quantile(
          col((s) => s.requestToLast),
          0.9,
        ),
      ),
      (baseMed * 1000).toPrecision(3),
      `${(quantile(last, 0.5) / baseMed).toFixed(0)}×`,
      `${Math.max(...col((s) => s.eventRecords))} (${samples[0]!.addressees} addressees)`,
      Math.max(...col((s) => s.records)),
    ]);
  }
  return {
    title: `Runtime: event fan-out to N local subscribers over ${NODES} nodes (embedded cluster, RealClock)`,
    columns: [
      'subscribers N',
      'nodes',
      'samples',
      'publish → last median ms',
      'p90 ms',
      'publish → first median ms',
      'request → last median ms',
      'p90 ms',
      'baseline: N calls median µs',
      'publish → last / baseline',
      'event records (to)',
      'records per change',
    ],
    rows,
    notes: [
      'One change = `StopShards` of one Active shard, sent with `request` from a member that is not the singleton; the singleton publishes exactly one `StampedShardEvent` (`ShardDown`) for it.',
      'publish → last = from the singleton producing that event’s bus record (the memory bus’s per-produce hook) to the last of the N subscribers receiving it (`registerSubscriber` functions, N/5 per node; for N = 1, on the singleton’s node). request → last also counts the request’s way to the singleton (guardian, inbox) and its decide and map persist.',
      'baseline = the same N subscriber functions (which read the event and take the time, like above) called in a plain loop with one message object, in the same run; each timed sample repeats the loop ⌊100 000 / N⌋ times and is divided by that (harness `sample`, median). The ratio is what the bus, the guardians’ routing and the actors cost on top of the calls themselves.',
      'event records = bus records that carried the event (always 1), with the number of ids it was addressed to (N subscribers + 5 guardians); records per change = every record the change produced after the request (event, desired state, reply).',
      `Dataset: ${SHARDS} shards, minNumNodes ${NODES}, 1 record/s per shard; publishIntervalMs ${SETTINGS.publishIntervalMs}, pollIntervalMs ${SETTINGS.pollIntervalMs}. ${WARMUP} untimed changes first; each change stops another shard, and the cluster is quiet (no record for 50 ms) before the next.`,
    ],
  };
}

register({ name: 'runtime/fanout', run: fanout });
