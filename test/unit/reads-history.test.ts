// Reads answered at once (issue 34) against an independent checker, on random histories: a client
// sets datasets up and removes them (one change of a dataset at a time) while reads of the datasets
// come from every node, the store answers each write after a random delay, and the singleton's
// node is killed and brought back now and then, changes under way or not. The checker knows nothing
// of the singleton; it checks that the reads are linearizable: each shows the datasets after some
// prefix of their changes that holds every change acknowledged before the read was sent, none sent
// after it was answered, and no fewer than a read answered before it was sent showed (a read that
// showed a change not yet stored, lost in a failover, is caught by a later read).
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import type { DatasetConfig } from '../../src/core/dataset-config.js';
import { datasetRef, type DatasetRef, type Epoch } from '../../src/core/ids.js';
import type { Reply } from '../../src/core/shard-manager/protocol.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { SimDriver } from '../../src/sim/driver.js';
import { SeededRandom } from '../../src/sim/random.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';

const HISTORIES = Number(process.env.SHARDHERD_READ_HISTORIES ?? 80);
const STEPS = 60;
const DATASETS = ['d0', 'd1', 'd2'].map((d) => datasetRef(d));

/**
 * A MetaStore that answers each dataset write after a random delay of simulated time; a write under
 * way when its singleton's process is killed lands or not, by a coin (`killed`), as with a real one.
 */
class SlowDatasetWrites extends MemoryMetaStore {
  private readonly underWay = new Set<{ readonly epoch: Epoch; lost: boolean }>();

  constructor(
    private readonly clock: SimulatedClock,
    private readonly rng: SeededRandom,
  ) {
    super();
  }

  /** The process of the singleton of `epoch` was killed. */
  killed(epoch: Epoch): void {
    for (const w of this.underWay) if (w.epoch === epoch) w.lost = this.rng.chance(0.5);
  }

  private async write(epoch: Epoch, op: () => Promise<void>): Promise<void> {
    const w = { epoch, lost: false };
    this.underWay.add(w);
    await new Promise<void>((resolve) => this.clock.schedule(this.rng.int(0, 800), resolve));
    this.underWay.delete(w);
    // Lost with its process: it never lands, and nobody waits for it any more.
    if (w.lost) return new Promise<void>(() => undefined);
    return op();
  }

  override putDataset(config: DatasetConfig, epoch: Epoch): Promise<void> {
    return this.write(epoch, () => super.putDataset(config, epoch));
  }

  override deleteDataset(dataset: DatasetRef, epoch: Epoch): Promise<void> {
    return this.write(epoch, () => super.deleteDataset(dataset, epoch));
  }
}

interface Change {
  readonly dataset: DatasetRef;
  readonly kind: 'setup' | 'remove';
  acked: boolean;
}

interface Read {
  /** When it was sent, and when its answer was seen, on one counter of the history's events. */
  readonly sentAt: number;
  answeredAt: number;
  /** Per dataset, how many of its changes were acknowledged when the read was sent. */
  readonly ackedBefore: ReadonlyMap<DatasetRef, number>;
  /** Per dataset, how many of its changes were sent when the answer was seen. */
  sentBefore: Map<DatasetRef, number> | undefined;
  shown: readonly DatasetRef[] | undefined;
}

/** Whether the dataset exists after its first `k` changes, each applied as the singleton applies it. */
function existsAfter(changes: readonly Change[], k: number): boolean {
  let exists = false;
  for (const c of changes.slice(0, k)) exists = c.kind === 'setup';
  return exists;
}

/**
 * What is wrong with the answered reads, or undefined. Per dataset, each read is given the least
 * prefix of the dataset's changes that explains what it showed, within its window, and no less than
 * the prefix of any read answered before it was sent (the least choice leaves the later reads the
 * most room, so a history this rejects has no explanation at all).
 */
function readsProblem(reads: readonly Read[], changes: ReadonlyMap<DatasetRef, readonly Change[]>): string | undefined {
  const bySend = [...reads].sort((x, y) => x.sentAt - y.sentAt);
  for (const d of DATASETS) {
    const all = changes.get(d) ?? [];
    const chosen = new Map<Read, number>();
    for (const read of bySend) {
      const floor = Math.max(read.ackedBefore.get(d) ?? 0, ...bySend.filter((r) => r.answeredAt < read.sentAt).map((r) => chosen.get(r) ?? 0));
      const hi = read.sentBefore!.get(d) ?? 0;
      const shown = read.shown!.includes(d);
      let k = floor;
      while (k <= hi && existsAfter(all, k) !== shown) k++;
      if (k > hi) {
        return `${d} ${shown ? 'shown' : 'not shown'} by the read sent at ${read.sentAt}, but after changes ${floor}..${hi} of [${all.map((c) => c.kind).join(', ')}] it ${shown ? 'does not exist' : 'exists'}`;
      }
      chosen.set(read, k);
    }
  }
  return undefined;
}

async function history(seed: number): Promise<{ reads: number; changes: number; failovers: number }> {
  const rng = new SeededRandom(seed);
  const clock = new SimulatedClock(0);
  const store = new SlowDatasetWrites(clock, new SeededRandom(seed + 1_000_000));
  const c = new EmbeddedCluster({
    name: `reads-history-${seed}`,
    clock,
    nodes: ['n1', 'n2', 'n3'],
    metaStore: store,
    log: pino({ level: 'silent' }),
    sessionTimeoutMs: 1_000,
    heartbeatIntervalMs: 250,
    settings: { publishIntervalMs: 500, recoveryReplyTimeoutMs: 500, pollIntervalMs: 250 },
  });
  const driver = new SimDriver(c);
  const changes = new Map<DatasetRef, Change[]>(DATASETS.map((d) => [d, []]));
  const outstanding = new Set<DatasetRef>();
  const reads: Read[] = [];
  let events = 0;
  const counts = () => new Map(DATASETS.map((d) => [d, changes.get(d)!.length] as const));
  let failovers = 0;
  try {
    await c.startNodes();
    await driver.advance(1_500);
    for (let step = 0; step < STEPS; step++) {
      const running = c.nodes.filter((n) => n.state === 'running' && n.isMember);
      const roll = rng.int(0, 99);
      if (roll < 40) {
        const d = rng.pick(DATASETS);
        if (!outstanding.has(d) && running.length > 0) {
          const kind = rng.chance(0.6) ? 'setup' : 'remove';
          const change: Change = { dataset: d, kind, acked: false };
          changes.get(d)!.push(change);
          outstanding.add(d);
          const from = rng.pick(running);
          const sent: Promise<Reply> =
            kind === 'setup'
              ? from.request(
                  (replyTo) =>
                    ({
                      type: 'SetupDataset',
                      config: { ref: d, numShards: 2, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 1 } },
                      replyTo,
                    }) as never,
                  60_000,
                )
              : from.request((replyTo) => ({ type: 'RemoveDataset', dataset: d, replyTo }), 60_000);
          void sent.then(
            (reply) => {
              // Set up, already there, removed, already gone: each is the change done.
              expect(['DatasetVerified', 'DatasetExists', 'Success', 'DatasetRemoved', 'DatasetUnknown']).toContain(reply.type);
              change.acked = true;
              outstanding.delete(d);
            },
            () => undefined, // unanswered: the dataset stays busy, its outcome unknown
          );
        }
      } else if (roll < 85 && running.length > 0) {
        const read: Read = {
          sentAt: ++events,
          answeredAt: Infinity,
          ackedBefore: new Map(DATASETS.map((d) => [d, changes.get(d)!.filter((x) => x.acked).length] as const)),
          sentBefore: undefined,
          shown: undefined,
        };
        reads.push(read);
        void rng
          .pick(running)
          .request((replyTo) => ({ type: 'ListRegisteredDatasets', replyTo }), 5_000)
          .then(
            (reply) => {
              if (reply.type !== 'RegisteredDatasets') return;
              read.shown = reply.datasets;
              read.answeredAt = ++events;
              read.sentBefore = counts();
            },
            () => undefined,
          );
      } else if (roll >= 94) {
        // The singleton's node dies and comes back as a new incarnation: the next one recovers.
        const singleton = await c.singletonNode();
        const lease = await store.readLease();
        if (singleton && lease) {
          singleton.crash();
          store.killed(lease.epoch);
          failovers++;
          await driver.advance(rng.int(0, 1_500));
          void singleton.restart();
        }
      }
      await driver.advance(rng.int(0, 300));
    }
    await driver.advance(10_000);
  } finally {
    await c.stop();
  }
  const answered = reads.filter((r) => r.shown !== undefined);
  expect(readsProblem(answered, changes), `seed ${seed}`).toBeUndefined();
  return { reads: answered.length, changes: [...changes.values()].reduce((n, x) => n + x.length, 0), failovers };
}

describe('reads answered at once, against an independent checker', () => {
  it(`show every acknowledged change and nothing not yet sent, over ${HISTORIES} random histories with slow stores and failovers`, async () => {
    let reads = 0;
    let changes = 0;
    let failovers = 0;
    for (let seed = 1; seed <= HISTORIES; seed++) {
      const r = await history(seed);
      reads += r.reads;
      changes += r.changes;
      failovers += r.failovers;
    }
    // The histories really exercised it: many reads checked, changes and failovers among them.
    expect(reads).toBeGreaterThan(HISTORIES * 25);
    expect(changes).toBeGreaterThan(HISTORIES * 10);
    expect(failovers).toBeGreaterThan(0);
  }, 300_000);

  it('the checker refuses a read that misses an acknowledged change, one that shows a change not yet sent, and one that goes back', () => {
    const d = DATASETS[0]!;
    const changes = new Map<DatasetRef, Change[]>([[d, [{ dataset: d, kind: 'setup', acked: false }]]]);
    const none = new Map(DATASETS.map((x) => [x, 0] as const));
    const one = new Map(DATASETS.map((x) => [x, x === d ? 1 : 0] as const));
    const read = (
      sentAt: number,
      answeredAt: number,
      ackedBefore: Map<DatasetRef, number>,
      sentBefore: Map<DatasetRef, number>,
      shown: DatasetRef[],
    ): Read => ({
      sentAt,
      answeredAt,
      ackedBefore,
      sentBefore,
      shown,
    });
    expect(readsProblem([read(1, 2, one, one, [])], changes)).toMatch(/d0 not shown/);
    expect(readsProblem([read(1, 2, none, none, [d])], changes)).toMatch(/d0 shown/);
    expect(readsProblem([read(1, 2, none, one, [d])], changes)).toBeUndefined();
    expect(readsProblem([read(1, 2, none, one, [])], changes)).toBeUndefined();
    // Shown, then (a read sent after that answer) not shown: no prefix order explains it.
    expect(readsProblem([read(1, 2, none, one, [d]), read(3, 4, none, one, [])], changes)).toMatch(/d0 not shown by the read sent at 3/);
    // The same two reads overlapping in time are linearizable (the second took effect first).
    expect(readsProblem([read(1, 4, none, one, [d]), read(2, 3, none, one, [])], changes)).toBeUndefined();
  });
});
