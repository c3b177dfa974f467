// The faults: a seeded schedule of disturbances, one drawn a step (crashes, restarts, singleton
// crashes, also in the middle of a reassignment or a handoff, pauses, MetaStore write failures,
// poison records, subscribers that come and go, drains, undrains, replacements, drained nodes that
// stop), with `detector` the detector's own (cuts, isolation, 1 s pauses), and the real world's
// (stalls, refusals and resets, slow joins, graceful restarts of the singleton's host).
import type { ShardherdNode } from '../actors/node-process.js';
import type { EmbeddedCluster } from '../embedded/embedded-cluster.js';
import { leaseWaitMs } from '../cluster/failure-detector/settings.js';
import type { DetectorWorld } from './detector-world.js';
import { SeededRandom } from './random.js';
import type { RunCounters } from './statistics.js';
import { DATASETS, FILODB_DATASETS, RATE, SESSION_MS, type PreCrash, type SimWorld } from './world.js';

export class FaultSchedule {
  private readonly rng: SeededRandom;
  /** Graceful restarts of the singleton's host (with the real world's faults). */
  private readonly handoverRng: SeededRandom;
  private readonly note: (what: string) => void;
  /** Replacement nodes added so far (`m1`, `m2`, ...). */
  private spares = 0;

  constructor(
    private readonly sim: SimWorld,
    private readonly stats: RunCounters,
  ) {
    this.rng = new SeededRandom(sim.seed);
    this.handoverRng = new SeededRandom(sim.seed ^ 0x6ace);
    this.note = sim.record.note;
  }

  /**
   * The detector's own faults leave less room for restarts in the schedule: before the quiet steps
   * every dead node comes back, so the cluster ends with room for every shard and I5 judges
   * ingestion, not a cluster too small to hold its shards (a drained node takes none).
   */
  async restartTheCrashed(world: DetectorWorld): Promise<void> {
    for (const n of this.sim.crashed()) {
      this.note(`restart ${n.node} (new incarnation) before the quiet steps`);
      await n.start();
      world.started(n.node);
      this.stats.restarts++;
    }
  }

  private adminRequest(build: Parameters<EmbeddedCluster['request']>[0]) {
    return this.sim.ask(
      this.sim.cluster.request(build, 5_000).catch((e: unknown) => ({ type: 'Failed', message: String(e) }) as const),
      'an admin request',
    );
  }

  /** This step's fault; what the MetaStore held if it crashed the singleton. */
  async injectFault(): Promise<PreCrash | undefined> {
    const singleton = await this.sim.cluster.singletonNode();
    const others = this.sim.live().filter((n) => n !== singleton);
    // The detector's own faults, drawn only with it, so the session-only schedule stays as it was.
    if (this.sim.detector && this.sim.live().length > 2 && this.rng.chance(0.3)) return this.detectorFault(singleton, this.sim.detector);
    const r = this.rng.int(0, 99);
    if (r < 10 && others.length > 1 && this.sim.live().length > 2) {
      const victim = this.rng.pick(others);
      this.note(`crash ${victim.node}`);
      this.sim.detector?.crashed(victim.node, this.sim.keyOf(victim), false, this.sim.liveOthers(victim));
      victim.crash();
      this.stats.crashes++;
    } else if (r < 18 && singleton && this.sim.live().length > 2) {
      return this.crashSingleton(singleton, '');
    } else if (r < 22 && singleton && others.length > 1 && this.sim.live().length > 3) {
      // The singleton dies while it is moving a departed node's shards.
      const victim = this.rng.pick(others);
      this.note(`crash ${victim.node}, then the singleton ${singleton.node} in the middle of the reassignment`);
      this.sim.detector?.crashed(victim.node, this.sim.keyOf(victim), false, this.sim.liveOthers(victim));
      victim.crash();
      this.stats.crashes += 2;
      // Until the singleton acts on the departure: the session, or the lease with the detector.
      await this.sim.driver.advance(this.sim.detector ? leaseWaitMs(this.sim.detector.settings) + this.sim.detector.settings.heartbeatIntervalMs : SESSION_MS);
      for (let i = this.rng.int(0, 30); i > 0; i--) await new Promise<void>((res) => setImmediate(res));
      this.sim.detector?.crashed(singleton.node, this.sim.keyOf(singleton), true, this.sim.liveOthers(singleton));
      singleton.crash();
    } else if (r < 40 && this.sim.crashed().length > 0) {
      const node = this.rng.pick(this.sim.crashed());
      this.note(`restart ${node.node} (new incarnation)`);
      await node.start();
      this.sim.detector?.started(node.node);
      this.stats.restarts++;
      this.slowJoin(node);
    } else if (r < 46 && this.sim.live().length > 2) {
      const node = this.rng.pick(this.sim.live());
      const ms = this.rng.pick([300, 2_500]);
      this.note(`pause ${node.node}${node === singleton ? ' (the singleton)' : ''} for ${ms} ms`);
      node.pause();
      this.sim.detector?.paused(node.node, ms);
      this.stats.pauses++;
      this.sim.clock.schedule(ms, () => node.resume());
    } else if (r < 52) {
      const n = this.rng.int(1, 3);
      this.note(`the next ${n} MetaStore writes fail`);
      this.sim.metaStore.failWrites(n);
    } else if (r < 56) {
      const d = this.rng.pick(FILODB_DATASETS);
      const shard = this.rng.int(0, d.numShards - 1);
      if (!this.sim.poison.has(`${d.ref}/${shard}`)) {
        const offset = Math.floor((this.sim.clock.now() * RATE) / 1000) + 5;
        this.sim.poison.set(`${d.ref}/${shard}`, offset);
        this.stats.poisoned++;
        this.note(`poison record ${d.ref}/${shard}@${offset}`);
      }
    } else if (r < 64 && this.sim.live().length > 0) {
      const node = this.rng.pick(this.sim.live());
      const ds = this.rng.pick(DATASETS).ref;
      this.sim.subscribers.push(this.sim.track(node, ds));
      this.note(`subscriber on ${node.node} for ${ds}`);
    } else if (r < 68 && this.sim.subscribers.length > 1) {
      const t = this.rng.pick(this.sim.subscribers);
      t.sub.close();
      this.sim.subscribers.splice(this.sim.subscribers.indexOf(t), 1);
      this.note(`subscriber ${t.sub.id} leaves`);
    } else if (r < 78 && this.sim.live().length > 2) {
      return this.nodeOperation(singleton, others);
    }
    return undefined;
  }

  /**
   * A fault of the detector's network or a pause it must survive: a one-way cut between two nodes,
   * a node cut off both ways from every other, the singleton cut off one way from half the others,
   * or a 1 s pause. The bus and the membership are not cut: the detector must judge on its own.
   */
  private async detectorFault(singleton: ShardherdNode | undefined, w: DetectorWorld): Promise<undefined> {
    const nodes = this.sim.live();
    const kind = this.rng.int(0, 3);
    if (kind === 0) {
      const a = this.rng.pick(nodes);
      const b = this.rng.pick(nodes.filter((n) => n !== a));
      const ms = this.rng.pick([800, 2_000, 4_000]);
      this.note(`cut ${a.node} → ${b.node} for ${ms} ms (detector links, one way)`);
      w.cut(a.node, b.node, ms);
    } else if (kind === 1) {
      const x = this.rng.pick(nodes);
      const ms = this.rng.pick([1_500, 3_000]);
      this.note(`isolate ${x.node}${x === singleton ? ' (the singleton)' : ''} from every node for ${ms} ms (detector links)`);
      for (const o of this.sim.cluster.nodes) {
        if (o === x) continue;
        w.cut(x.node, o.node, ms);
        w.cut(o.node, x.node, ms);
      }
    } else if (kind === 2 && singleton) {
      const targets = nodes.filter((n) => n !== singleton).filter(() => this.rng.chance(0.5));
      const ms = this.rng.pick([1_000, 2_500]);
      this.note(`cut the singleton ${singleton.node} → ${targets.map((t) => t.node).join(',') || 'nobody'} for ${ms} ms (detector links, one way)`);
      for (const t of targets) w.cut(singleton.node, t.node, ms);
    } else {
      const node = this.rng.pick(nodes);
      this.note(`pause ${node.node}${node === singleton ? ' (the singleton)' : ''} for 1000 ms (it must not be evicted)`);
      node.pause();
      w.paused(node.node, 1_000);
      this.stats.pauses++;
      this.sim.clock.schedule(1_000, () => node.resume());
    }
    return undefined;
  }

  /**
   * This step's faults of the real world: an event loop stalled (the process runs nothing, its
   * timers fire late all at once afterwards: the product cannot tell it from a SIGSTOP, so it is a
   * pause), and a node's endpoint refusing and resetting connections though it runs.
   */
  async worldFaults(w: DetectorWorld): Promise<void> {
    const singleton = await this.sim.cluster.singletonNode();
    for (const f of this.sim.real.step(
      this.sim.live().map((n) => n.node),
      singleton?.node,
    )) {
      if (f.kind === 'stall') {
        const node = this.sim.cluster.node(f.node);
        if (node.state !== 'running') continue;
        this.note(`stall ${f.node}${node === singleton ? ' (the singleton)' : ''} for ${f.ms} ms (its event loop is busy)`);
        node.pause();
        w.paused(f.node, f.ms);
        this.stats.pauses++;
        this.sim.clock.schedule(f.ms, () => node.resume());
      } else {
        this.note(
          `${f.to}${f.to === singleton?.node ? ' (the singleton)' : ''} refuses and resets ${f.from.join(',')}${f.bothWays ? ' both ways' : ''} for ${f.ms} ms (detector endpoints, both processes run)`,
        );
        for (const from of f.from) {
          this.sim.resets.add(from, f.to, f.ms);
          this.sim.detector?.refusing(from, f.to, f.ms);
          if (f.bothWays) {
            this.sim.resets.add(f.to, from, f.ms);
            this.sim.detector?.refusing(f.to, from, f.ms);
          }
        }
        w.disturbed(f.ms);
      }
    }
    if (this.handoverRng.chance(0.08)) await this.gracefulRestartOfSingletonHost(w);
  }

  /**
   * An operator's rolling restart reaches the singleton's host: its graceful stop hands the role
   * over (it stops acting, waits out its grants, releases its lease; the next in line takes it at
   * once), and the node starts again as a new incarnation a moment later. Drawn from a stream of its
   * own, so the other faults of a seed draw as before.
   */
  private async gracefulRestartOfSingletonHost(w: DetectorWorld): Promise<void> {
    const singleton = await this.sim.cluster.singletonNode();
    if (!singleton || singleton.state !== 'running' || this.sim.live().length <= 2) return;
    this.note(`graceful restart of the singleton's host ${singleton.node}: it hands the role over`);
    const key = this.sim.keyOf(singleton);
    w.handingOver();
    let stopped = false;
    const stopping = singleton.stop().finally(() => (stopped = true));
    for (let waited = 0; !stopped && waited < 10_000; waited += 50) await this.sim.driver.advance(50);
    await stopping;
    w.stopped(key);
    this.stats.restarts++;
    await this.sim.driver.advance(this.handoverRng.int(200, 3_000));
    await singleton.start();
    w.started(singleton.node);
  }

  /** A node that just joined stays silent a while (a slow start): no heartbeat, no ingestion. */
  private slowJoin(node: ShardherdNode): void {
    if (!this.sim.detector || node.state !== 'running') return;
    const ms = this.sim.real.slowJoinMs();
    if (ms === 0) return;
    this.note(`${node.node} is slow after joining: it runs nothing for ${ms} ms`);
    node.pause();
    this.sim.detector.paused(node.node, ms);
    this.stats.pauses++;
    this.sim.clock.schedule(ms, () => node.resume());
  }

  private async crashSingleton(singleton: ShardherdNode, when: string): Promise<PreCrash | undefined> {
    // Asking the singleton lets simulated time pass: everything else is read after, with no time
    // passing before the crash, so it is what the MetaStore and the membership held at the crash.
    const state = await this.sim.ask(singleton.singletonState(), `the singleton state of ${singleton.node}`);
    if ((await this.sim.cluster.singletonNode()) !== singleton) {
      // With the detector the role can pass while a step runs (its lease ran out during a pause):
      // this is a node's crash, not the singleton's, and no failover follows it.
      this.note(`crash ${singleton.node} (no longer the singleton)${when ? ` ${when}` : ''}`);
      this.sim.detector?.crashed(singleton.node, this.sim.keyOf(singleton), false, this.sim.liveOthers(singleton));
      singleton.crash();
      this.stats.crashes++;
      return undefined;
    }
    const subscriptions = new Set((state?.subscriptions.toList() ?? []).flatMap((x) => x.subscribers.map((id) => `${id} ${x.dataset}`)));
    const maps = await this.sim.storedMaps();
    const epoch = (await this.sim.metaStore.readLease())?.epoch ?? 0;
    const members = new Map(this.sim.cluster.membership.view().members.map((m) => [m.node as string, m.incarnation as string]));
    const draining = new Set((await this.sim.operations()).draining);
    this.note(`crash the singleton ${singleton.node}${when ? ` ${when}` : ''}`);
    this.sim.detector?.crashed(singleton.node, this.sim.keyOf(singleton), true, this.sim.liveOthers(singleton));
    singleton.crash();
    this.stats.crashes++;
    return { maps, node: singleton.node, epoch, members, subscriptions, draining };
  }

  /** An operator's drain, undrain or replacement, or a drained node stopping; sometimes the singleton dies right after. */
  private async nodeOperation(singleton: ShardherdNode | undefined, others: ShardherdNode[]): Promise<PreCrash | undefined> {
    const draining = new Set<string>((await this.sim.operations()).draining);
    const candidates = others.filter((n) => !draining.has(n.node));
    const kind = this.rng.int(0, 3);
    this.stats.nodeOperations++;
    // A node operation changes who helps judge a silent node: a drained node stops helping once it
    // holds nothing, and a spare helps only once it has probed the suspect long enough itself, so
    // an eviction may rightly take longer than an undisturbed cluster's bound (I12; seeds 43235,
    // 43495 and 63396: a crash, then a node operation within the bound).
    this.sim.detector?.disturbed(0);
    if (kind === 0 && candidates.length > 0) {
      const node = this.rng.pick(candidates);
      const reply = await this.adminRequest((replyTo) => ({ type: 'RemoveNode', node: node.node, replyTo }));
      this.note(`drain ${node.node}: ${reply.type}`);
    } else if (kind === 1 && draining.size > 0) {
      const node = this.rng.pick([...draining].sort());
      const reply = await this.adminRequest((replyTo) => ({ type: 'AddNode', node, replyTo }));
      this.note(`undrain ${node}: ${reply.type}`);
    } else if (kind === 2 && candidates.length > 0) {
      const old = this.rng.pick(candidates);
      const name = `m${++this.spares}`;
      const rack = this.sim.rackOf.get(old.node)!;
      this.sim.rackOf.set(name, rack);
      const reply = await this.adminRequest((replyTo) => ({ type: 'ReplaceNode', old: old.node, new: name, replyTo }));
      this.note(`replace ${old.node} by ${name} (${rack}): ${reply.type}`);
      const added = this.sim.cluster.add(name, { rack });
      await added.start();
      this.sim.detector?.joined(name);
      this.slowJoin(added);
    } else {
      const released = this.sim.live().filter((n) => n.isDrained && n !== singleton);
      if (released.length === 0) return undefined;
      const node = this.rng.pick(released);
      this.note(`drained ${node.node} stops`);
      this.sim.detector?.stopped(this.sim.keyOf(node));
      await node.stop();
      return undefined;
    }
    if (singleton && singleton.state === 'running' && this.sim.live().length > 2 && this.rng.int(0, 2) === 0) {
      await this.sim.driver.advance(this.rng.int(20, 300));
      if (singleton.state === 'running') return this.crashSingleton(singleton, 'in the middle of the handoffs');
    }
    return undefined;
  }
}
