// The invariant checker: reads the cluster at each step's end (and at rest, and at the end) and
// records what the rules of `invariant-rules.ts` find broken, plus what it keeps between steps to
// judge them (departures, the singletons' first acts, incarnations, the lease's epoch). I7, I13 and
// I16 are judged as the world runs (`map-watch.ts`, `world.ts`); I15 on the run's sink calls at the end.
import type { DatasetRef } from '../core/ids.js';
import { ShardMapper } from '../core/shard-mapper.js';
import type { ShardherdNode } from '../actors/node-process.js';
import type { MapWatch } from './map-watch.js';
import { mayIngest } from './placement-checks.js';
import { oneWriterViolations } from './sink-calls.js';
import type { RunCounters } from './statistics.js';
import { atRestViolations, failoverLosses, mapsAheadOfLease, rackViolations, subscribersGoingBack, uningested, waitingForCooldown } from './invariant-rules.js';
import { FILODB_DATASETS, type PreCrash, type SimWorld } from './world.js';

export class InvariantChecker {
  /** The incarnation each node ran at the last check: one that changed has ended (a fenced restart, say). */
  private readonly lastIncarnation = new Map<string, string>();
  // When each node was last seen leaving the membership (I2 for copies kept for lost nodes).
  private readonly departedAt = new Map<string, number>();
  /** Each singleton epoch → when the simulator first saw it act (at a step's checks). */
  private readonly firstActingAt = new Map<number, number>();
  private viewBefore: Set<string> | undefined;
  private lastEpoch = 0;

  constructor(
    private readonly w: SimWorld,
    private readonly maps: MapWatch,
    private readonly stats: RunCounters,
  ) {}

  /** The members now, remembered to tell who left by the next step's end. */
  noteMembers(): void {
    this.viewBefore = new Set(this.w.cluster.membership.view().members.map((m) => m.node as string));
  }

  /** Who left the membership during the step (and since when), and which singleton acts now. */
  async noteStepEnd(): Promise<void> {
    const { cluster, clock } = this.w;
    const viewNow = new Set(cluster.membership.view().members.map((m) => m.node as string));
    for (const node of this.viewBefore ?? []) if (!viewNow.has(node)) this.departedAt.set(node, clock.now());
    for (const node of viewNow) this.departedAt.delete(node);
    const acting = (await cluster.singletonNode())?.actingSingletonEpoch;
    if (acting !== undefined && !this.firstActingAt.has(acting)) this.firstActingAt.set(acting, clock.now());
    this.viewBefore = viewNow;
  }

  /**
   * When a lost node's replacement delay can have started: its departure, or later when the
   * singleton acting now was not yet acting then. An absence its predecessor never recorded (the
   * predecessor died first, and its successor too, seed 2061) begins at that singleton's recovery.
   */
  private async delayStartOf(node: string): Promise<number | undefined> {
    const departed = this.departedAt.get(node);
    if (departed === undefined) return undefined;
    const epoch = (await this.w.cluster.singletonNode())?.actingSingletonEpoch;
    return Math.max(departed, (epoch === undefined ? undefined : this.firstActingAt.get(epoch)) ?? this.w.clock.now());
  }

  /** After every step: I10–I12 with the detector, I1, I8, I6, and I4 after a crash of the singleton. */
  async checkEveryStep(preCrash: PreCrash | undefined): Promise<void> {
    const { cluster, clock, metaStore, subscribers, detector: world } = this.w;
    const violate = this.w.record.violate;
    if (world) {
      for (const n of cluster.nodes) {
        const before = this.lastIncarnation.get(n.node);
        if (before !== undefined && before !== n.incarnation) {
          world.stopped(`${n.node}@${before}`);
          // A new incarnation (a fenced or evicted node restarts by itself): its join grace started
          // within the last step (counted from now, later than it did: I12 judges it no sooner).
          if (n.incarnation !== undefined) world.joined(n.node);
        }
        if (n.incarnation !== undefined) this.lastIncarnation.set(n.node, n.incarnation);
      }
      for (const v of world.overdueEvictions()) violate(v.invariant, v.message);
      const holder = await cluster.singletonNode();
      const askedAt = clock.now();
      const state = holder ? await this.w.ask(holder.singletonState(), `the singleton state of ${holder.node}`) : undefined;
      if (state) for (const v of world.readmitted(state.epoch, state.members, askedAt)) violate(v.invariant, v.message);
    }
    // Forget subscribers whose node died or restarted: they are gone with it.
    for (const t of [...subscribers]) {
      if (t.node.state !== 'running' || t.node.incarnation !== t.incarnation) subscribers.splice(subscribers.indexOf(t), 1);
    }

    // I1: a live member ingests a shard only where the singleton's map declares a copy (replicas,
    // and both copies of a handoff), or a Leaving copy it held a step ago (its removal is on the way).
    // A copy that writes under no token (its node acts on no map that gives it the copy yet, such
    // as a new singleton's host before its own map reached its coordinator) writes nothing.
    const maps = await this.w.storedMaps();
    const mapsNow = new Map([...maps].map(([ref, snap]) => [ref, ShardMapper.fromSnapshot(snap)]));
    for (const n of this.w.live()) {
      const writes = await this.writable(n);
      for (const r of await this.w.ask(n.running(), `the running shards of ${n.node}`)) {
        if (!writes(r.dataset) || r.writingUnder === undefined) continue;
        const key = `${r.dataset}/${r.shard}`;
        const map = mapsNow.get(r.dataset);
        if (map && !mayIngest(map, r.shard, n.node, this.maps.declaredRecently(r.dataset))) {
          violate('I1', `${key} is ingested by ${n.node}, which holds no copy of it (holders: ${map.nodesForShard(r.shard).join(', ') || 'none'})`);
        }
      }
    }

    const ops = await this.w.operations();
    const placeable = cluster.membership
      .view()
      .members.map((m) => m.node as string)
      .filter((node) => !(ops.draining as readonly string[]).includes(node));
    for (const message of rackViolations(mapsNow, placeable, this.w.rackOf)) violate('I8', message);

    for (const message of subscribersGoingBack(subscribers)) violate('I6', message);
    const lease = await metaStore.readLease();
    for (const message of mapsAheadOfLease((await this.w.storedMaps()).values(), lease?.epoch)) violate('I6', message);
    if (lease && lease.epoch > this.lastEpoch) {
      if (this.lastEpoch > 0) this.stats.failovers++;
      this.lastEpoch = lease.epoch;
    }

    // I4: a failover loses no dataset, assignment or cooldown.
    if (preCrash) await this.checkFailover(preCrash);
  }

  /**
   * Which datasets' records `n` can write now. Without the detector, all it runs. With it, a node
   * writes only under a lease that runs now on its own clock and was granted under the epoch of its
   * map of the dataset (§11.4): a node whose singleton died before telling it that its copy was
   * removed keeps the shard's actor until a new singleton's maps reach it (a session later), but
   * writes nothing meanwhile — that is not ingesting it.
   */
  private async writable(n: ShardherdNode): Promise<(dataset: string) => boolean> {
    const world = this.w.detector;
    if (!world) return () => true;
    const lease = n.lease;
    if (!lease || world.clockOf(n.node).now() >= lease.until) return () => false;
    const cache = await this.w.ask(n.cache(), `the map cache of ${n.node}`);
    return (dataset) => cache?.maps.get(dataset as DatasetRef)?.epoch === lease.epoch;
  }

  private async checkFailover(pre: PreCrash): Promise<void> {
    const { cluster, metaStore, driver, detector: world, poison, sinkFaults } = this.w;
    // Give the new singleton time to detect, take over and recover.
    const recovered = await driver.until(
      async () => ((await metaStore.readLease())?.epoch ?? 0) > pre.epoch && (await cluster.singletonNode()) !== undefined,
      10_000,
      250,
    );
    if (!recovered) this.w.record.violate('I4', `no new singleton took over within 10 s of the crash of ${pre.node}`);
    await driver.advance(1_000);
    const after = await this.w.storedMaps();
    const holder = await cluster.singletonNode();
    const state = holder ? await this.w.ask(holder.singletonState(), `the singleton state of ${holder.node}`) : undefined;
    const losses = failoverLosses({
      pre,
      after,
      state,
      subscribers: this.w.subscribers,
      members: cluster.membership.view().members,
      wasRemoved: (key) => world?.wasRemoved(key) === true,
      exempt: (ref, s) => poison.has(`${ref}/${s}`) || sinkFaults?.faulted(ref, s) === true,
    });
    for (const message of losses) this.w.record.violate('I4', message);
  }

  /** When the cluster is at rest: I2, I9, I3 and the maps' presence (I4). */
  async checkAtRest(): Promise<void> {
    const { cluster, clock, metaStore } = this.w;
    const maps = await this.w.storedMaps();
    const view = cluster.membership.view();
    const draining = new Set<string>((await this.w.operations()).draining);
    const placeable = view.members.filter((m) => !draining.has(m.node)).map((m) => ({ node: m.node as string, rack: this.w.rackOf.get(m.node) ?? m.node }));
    const cooldowns = await metaStore.cooldowns();
    const delayStarts = new Map<string, number | undefined>();
    for (const node of this.departedAt.keys()) delayStarts.set(node, await this.delayStartOf(node));
    const broken = atRestViolations({
      now: clock.now(),
      maps,
      members: view.members.map((m) => m.node),
      placeable,
      cooldowns,
      delayStarts,
      subscribers: this.w.lossy ? [] : this.w.subscribers,
    });
    for (const b of broken) this.w.record.violate(b.invariant, b.message);
  }

  /** Whether some shard has lost a copy to a failure and waits for its cooldown to end. */
  async shardsWaitingForCooldown(): Promise<boolean> {
    const maps = await this.w.storedMaps();
    return waitingForCooldown(maps, await this.w.metaStore.cooldowns(), this.w.clock.now(), this.w.poison, this.w.sink);
  }

  /** At the end: the checks at rest, and I5 (every record produced until a moment before the end was ingested at least once). */
  async checkAtEnd(): Promise<void> {
    await this.checkAtRest();
    for (const message of uningested(this.w.sink, this.w.poison, this.w.clock.now() - 3_000)) this.w.record.violate('I5', message);
  }

  /** I15, from the sink calls themselves: one writer at a time for every shard of a single-copy dataset. */
  checkOneWriter(): void {
    const { detector: world, real, sinkCalls } = this.w;
    if (!world) return;
    const handoffs = this.maps.handoffs;
    const rules = {
      singleCopy: (dataset: string) => FILODB_DATASETS.some((d) => d.ref === dataset),
      stoppedDuring: (node: string, from: number, to: number) => world.stoppedDuring(node, from, to),
      sinkTimeoutMs: real.choices.sinkTimeoutMs,
      inHandoff: (dataset: string, shard: number, a: string, b: string, from: number, to: number) => handoffs.covers(dataset, shard, a, b, from, to),
    };
    for (const message of oneWriterViolations(sinkCalls.calls, rules)) this.w.record.violate('I15', message);
  }
}
