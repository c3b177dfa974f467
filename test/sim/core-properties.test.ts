// Properties of the pure core over random histories (fast-check): random joins, departures,
// restarts, datasets, node reports, operator commands, time passing and singleton failovers,
// with the invariants checked after every step. A failure prints the seed and the shrunk history.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DefaultShardAssignmentStrategy } from '../../src/core/assignment-strategy.js';
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import { datasetRef, epoch, incarnation, nodeId, replyTo, subscriberId, type DatasetRef, type ShardNum } from '../../src/core/ids.js';
import { ShardMapFollower } from '../../src/core/map-follower.js';
import type { Effect, Member, ShardManagerInput, StampedShardEvent } from '../../src/core/shard-manager/protocol.js';
import { ShardManager } from '../../src/core/shard-manager/shard-manager.js';
import type { ShardManagerState } from '../../src/core/shard-manager/step.js';
import type { ShardMapSnapshot } from '../../src/core/shard-map-snapshot.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { type ShardEvent, ShardEvents } from '../../src/core/status.js';

const COOLDOWN = 10_000;
const NODES = ['n0', 'n1', 'n2', 'n3', 'n4', 'n5'];
const DATASETS = [datasetRef('alpha'), datasetRef('beta')];
const watcher = subscriberId('guardian');

type Op =
  | { kind: 'join'; node: number }
  | { kind: 'leave'; node: number }
  | { kind: 'restart'; node: number }
  | { kind: 'setup'; ds: number; log2Shards: number; minNumNodes: number }
  | { kind: 'report'; ds: number; shard: number; event: 'started' | 'recovery' | 'error' | 'stopped'; pct: number }
  | { kind: 'stop'; ds: number; shard: number }
  | { kind: 'start'; ds: number; shard: number; node: number }
  | { kind: 'tick'; ms: number }
  | { kind: 'check' }
  | { kind: 'snapshot' }
  | { kind: 'failover' };

const node = fc.nat(NODES.length - 1);
const dsIdx = fc.nat(DATASETS.length - 1);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: node.map((n) => ({ kind: 'join' as const, node: n })) },
  { weight: 2, arbitrary: node.map((n) => ({ kind: 'leave' as const, node: n })) },
  { weight: 1, arbitrary: node.map((n) => ({ kind: 'restart' as const, node: n })) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('setup' as const), ds: dsIdx, log2Shards: fc.nat(6), minNumNodes: fc.integer({ min: 1, max: 5 }) }) },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('report' as const),
      ds: dsIdx,
      shard: fc.nat(63),
      event: fc.constantFrom('started' as const, 'recovery' as const, 'error' as const, 'stopped' as const),
      pct: fc.nat(100),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('stop' as const), ds: dsIdx, shard: fc.nat(63) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('start' as const), ds: dsIdx, shard: fc.nat(63), node }) },
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 2 * COOLDOWN }).map((ms) => ({ kind: 'tick' as const, ms })) },
  { weight: 1, arbitrary: fc.constant({ kind: 'check' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'snapshot' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'failover' as const }) },
);

function datasetConfig(ref: DatasetRef, log2: number, minNumNodes: number): DatasetConfig {
  const r = validateDatasetConfig({ ref, numShards: 2 ** log2, minNumNodes, source: { type: 'synthetic' } });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

/** Runs a history through the manager the way the actor layer would, checking invariants after each step. */
class World {
  readonly manager = new ShardManager({ reassignmentCooldownMs: COOLDOWN });
  state: ShardManagerState;
  now = 0;
  joinClock = 0;
  incarnations = new Map<string, number>();
  /** The guardian's cache: it follows the singleton's published events. */
  followers = new Map<DatasetRef, ShardMapFollower>();
  /** What the MetaStore holds. */
  persistedDatasets = new Map<DatasetRef, DatasetConfig>();
  persistedMaps = new Map<DatasetRef, ShardMapSnapshot>();
  persistedCooldowns = new Map<string, number>();
  readonly log: Effect[][] = [];
  private asked = 0;

  constructor() {
    this.state = this.manager.initialState();
    this.step({ type: 'SubscribeAll', subscriber: watcher }); // buffered until recovery
    this.step({ type: 'Recover', recovery: this.recoveryData(1, []) });
  }

  recoveryData(e: number, members: readonly Member[]) {
    return {
      epoch: epoch(e),
      datasets: [...this.persistedDatasets.values()],
      maps: [...this.persistedMaps.values(), ...[...this.followers.values()].flatMap((f) => (f.mapper ? [f.mapper.toSnapshot(f.epoch)] : []))],
      subscriptions: this.state.subscriptions.toList(),
      watchers: this.state.subscriptions.watcherList(),
      cooldowns: [...this.persistedCooldowns].map(([k, reassignedAt]) => {
        const [dataset, shard] = k.split('/');
        return { dataset: dataset as DatasetRef, shard: Number(shard), reassignedAt };
      }),
      members,
      running: [],
    };
  }

  /** A new reply address per request, as a real asker has (the singleton applies each address's request once). */
  adminReplyTo() {
    return replyTo(`admin-${++this.asked}`);
  }

  step(input: ShardManagerInput, admin = false): void {
    const before = this.state;
    const d = this.manager.decide(this.state, input, this.now);
    this.state = d.state;
    this.log.push([...d.effects]);
    this.checkEffects(before, d.effects, admin);
    this.perform(d.effects);
    this.checkState();
    // A membership change places free shards of every dataset; a new dataset places its own.
    if (input.type === 'MemberUp' || input.type === 'MemberDown') this.checkNoRoomLeft(input.type, [...this.state.datasets.keys()]);
    if (input.type === 'SetupDataset' && !before.datasets.has(input.config.ref)) this.checkNoRoomLeft(input.type, [input.config.ref]);
  }

  /**
   * I2 at the core level: after an assignment pass, no member has room for a shard that is free
   * and not held by a cooldown (FiloDB's single pass, and its join that asks only the newcomer,
   * can leave one).
   */
  checkNoRoomLeft(after: string, datasets: readonly DatasetRef[]): void {
    const strategy = new DefaultShardAssignmentStrategy();
    for (const ref of datasets) {
      const ds = this.state.datasets.get(ref)!;
      const held = new Set<number>();
      for (const [shard, at] of ds.cooldowns) {
        if (this.now - at <= COOLDOWN && ds.mapper.nodeForShard(shard) === undefined && ds.mapper.statusForShard(shard).type === 'Error') held.add(shard);
      }
      // A shard an operator stopped is not free: it waits for StartShards.
      for (const shard of ds.mapper.unassignedShards()) if (ds.mapper.statusForShard(shard).type === 'Stopped') held.add(shard);
      const spec = { numShards: ds.config.numShards, minNumNodes: ds.config.minNumNodes, held };
      for (const m of this.state.members) {
        expect(strategy.shardAssignments(m.node, spec, ds.mapper), `after ${after}: ${m.node} has room for free shards of ${ref}`).toEqual([]);
      }
    }
  }

  apply(op: Op): void {
    const ds = DATASETS[(op as { ds?: number }).ds ?? 0]!;
    const mapper = this.state.datasets.get(ds)?.mapper;
    switch (op.kind) {
      case 'join': {
        const name = NODES[op.node]!;
        if (this.state.members.some((m) => m.node === name)) return;
        return this.step({ type: 'MemberUp', member: this.member(name) });
      }
      case 'leave': {
        const m = this.state.members.find((x) => x.node === NODES[op.node]);
        if (m) this.step({ type: 'MemberDown', node: m.node, incarnation: m.incarnation });
        return;
      }
      case 'restart': {
        const name = NODES[op.node]!;
        this.incarnations.set(name, (this.incarnations.get(name) ?? 0) + 1);
        return this.step({ type: 'MemberUp', member: this.member(name) });
      }
      case 'setup':
        return this.step({ type: 'SetupDataset', config: datasetConfig(ds, op.log2Shards, op.minNumNodes), replyTo: this.adminReplyTo() });
      case 'report': {
        if (!mapper) return;
        const shard = (op.shard % mapper.numShards) as ShardNum;
        const owner = mapper.nodeForShard(shard);
        if (!owner) return;
        const m = this.state.members.find((x) => x.node === owner)!;
        const event: ShardEvent = {
          started: ShardEvents.ingestionStarted(ds, shard, owner),
          recovery: ShardEvents.recoveryInProgress(ds, shard, owner, op.pct),
          error: ShardEvents.ingestionError(ds, shard, owner, 'boom'),
          stopped: ShardEvents.ingestionStopped(ds, shard, owner),
        }[op.event];
        return this.step({ type: 'NodeReport', node: owner, incarnation: m.incarnation, seq: 1, events: [event] });
      }
      case 'stop':
        if (mapper) this.step({ type: 'StopShards', dataset: ds, shards: [op.shard % mapper.numShards], replyTo: this.adminReplyTo() }, true);
        return;
      case 'start':
        if (mapper)
          this.step({ type: 'StartShards', dataset: ds, node: NODES[op.node]!, shards: [op.shard % mapper.numShards], replyTo: this.adminReplyTo() }, true);
        return;
      case 'tick':
        this.now += op.ms;
        return;
      case 'check':
        return this.step({ type: 'CheckCooldowns' });
      case 'snapshot':
        return this.step({ type: 'PublishDigest' });
      case 'failover':
        return this.failover();
    }
  }

  member(name: string): Member {
    return { node: nodeId(name), incarnation: incarnation(`${name}#${this.incarnations.get(name) ?? 0}`), joinedAt: ++this.joinClock };
  }

  /** A new singleton recovers from the MetaStore and the guardian; nothing may be lost (I4). */
  failover(): void {
    const old = this.state;
    const fresh = this.manager.initialState();
    const d = this.manager.decide(fresh, { type: 'Recover', recovery: this.recoveryData(old.epoch + 1, old.members) }, this.now);
    this.state = d.state;
    this.log.push([...d.effects]);
    // The guardian follows the new singleton too: its first changes continue the recovered map.
    this.checkEffects(old, d.effects, false);
    this.perform(d.effects);
    expect([...this.state.datasets.keys()].sort()).toEqual([...old.datasets.keys()].sort());
    for (const [ref, ds] of old.datasets) {
      const got = this.state.datasets.get(ref)!;
      // Every assignment survives with its status. Recovery also runs one assignment pass (as a
      // membership change would), so a shard without owner may gain one; nothing else changes.
      for (let s = 0; s < ds.config.numShards; s++) {
        const before = ds.mapper.recordForShard(s);
        const after = got.mapper.recordForShard(s);
        if (before.assignments.length > 0) expect(after, `${ref}/${s} after failover`).toEqual(before);
        else if (after.assignments.length === 0) expect(after.status, `${ref}/${s} after failover`).toEqual(before.status);
      }
      expect([...got.cooldowns].sort()).toEqual([...ds.cooldowns].sort());
    }
    expect(this.state.subscriptions.toList()).toEqual(old.subscriptions.toList());
    this.checkState();
  }

  /** What a subscriber sees must make sense: a new owner only for a shard with none, no early reassignment. */
  checkEffects(before: ShardManagerState, effects: readonly Effect[], admin: boolean): void {
    for (const e of effects) {
      if (e.type !== 'PublishChanges') continue;
      const f = this.followers.get(e.dataset);
      // After a failover the new singleton's first changes continue the map it recovered.
      if (e.base.epoch !== e.epoch) {
        if (f) expect(f.applyChanges(e), `changes of ${e.dataset} from ${e.base.epoch}/${e.base.version}`).toBe('applied');
        continue;
      }
      e.events.forEach((ev, i) => this.checkEvent(before, admin, f, { type: 'StampedShardEvent', epoch: e.epoch, version: e.base.version + i + 1, event: ev }));
    }
  }

  /** One published event, as a watcher following the changes applies it. */
  checkEvent(before: ShardManagerState, admin: boolean, f: ShardMapFollower | undefined, stamped: StampedShardEvent): void {
    {
      const ev = stamped.event;
      if (ev.type === 'ShardAssignmentStarted' && f?.mapper) {
        // Never two owners: the singleton only assigns a shard that has no owner.
        expect(f.mapper.nodeForShard(ev.shard), `${ev.dataset}/${ev.shard} assigned while owned`).toBeUndefined();
        // Never reassigned inside its cooldown (operators may override with StartShards).
        const last = before.datasets.get(ev.dataset)?.cooldowns.get(ev.shard);
        if (!admin && last !== undefined && f.mapper.statusForShard(ev.shard).type === 'Error') {
          expect(this.now - last, `${ev.dataset}/${ev.shard} moved ${this.now - last} ms after its last move`).toBeGreaterThan(COOLDOWN);
        }
      }
      if (f) expect(f.applyEvent(stamped), `event v${stamped.version} for ${ev.dataset}`).toBe('applied');
    }
  }

  perform(effects: readonly Effect[]): void {
    for (const e of effects) {
      switch (e.type) {
        case 'PersistDataset':
          this.persistedDatasets.set(e.config.ref, e.config);
          break;
        case 'DeleteDataset':
          this.persistedDatasets.delete(e.dataset);
          this.persistedMaps.delete(e.dataset);
          break;
        case 'PersistShardMap':
          this.persistedMaps.set(e.snapshot.dataset, e.snapshot);
          break;
        case 'PersistCooldown':
          this.persistedCooldowns.set(`${e.dataset}/${e.shard}`, e.reassignedAt);
          break;
        case 'PublishSnapshot': {
          const ref = e.snapshot.dataset;
          const f = this.followers.get(ref) ?? new ShardMapFollower(ref);
          this.followers.set(ref, f);
          f.applySnapshot(e.snapshot);
          break;
        }
        default:
          break;
      }
    }
  }

  checkState(): void {
    const strategy = new DefaultShardAssignmentStrategy();
    for (const [ref, ds] of this.state.datasets) {
      const cap = Math.ceil(ds.config.numShards / ds.config.minNumNodes);
      for (let s = 0; s < ds.config.numShards; s++) {
        const owners = ds.mapper.recordForShard(s).assignments;
        expect(owners.length).toBeLessThanOrEqual(1);
        // Owners are always current members.
        if (owners[0]) expect(this.state.members.map((m) => m.node)).toContain(owners[0].node);
      }
      for (const owner of ds.mapper.allNodes()) {
        expect(ds.mapper.numShardsForNode(owner), `${owner} in ${ref}`).toBeLessThanOrEqual(cap);
        expect(strategy.remainingCapacity(owner, { numShards: ds.config.numShards, minNumNodes: ds.config.minNumNodes }, ds.mapper)).toBeGreaterThanOrEqual(0);
      }
      // The guardian's copy equals the singleton's after every step (I3 at the core level).
      const f = this.followers.get(ref);
      expect(f?.mapper?.equals(ds.mapper), `guardian copy of ${ref}`).toBe(true);
      expect(f!.version).toBe(ds.mapper.version);
    }
  }
}

describe('core properties over random histories', () => {
  it('no two owners, no node over capacity, no early reassignment, guardians in sync, nothing lost on failover', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 80 }), (ops) => {
        const w = new World();
        for (const op of ops) w.apply(op);
      }),
      { numRuns: 1000 },
    );
  });

  it('the same history at the same times gives the same decisions', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 40 }), (ops) => {
        const a = new World();
        const b = new World();
        for (const op of ops) {
          a.apply(op);
          b.apply(op);
        }
        expect(b.log).toEqual(a.log);
      }),
      { numRuns: 100 },
    );
  });

  it('every shard is assigned once minNumNodes nodes have joined, whatever the order of joins and setups', () => {
    const setupArb = fc.record({ ds: dsIdx, log2Shards: fc.nat(8), minNumNodes: fc.integer({ min: 1, max: 6 }) });
    fc.assert(
      fc.property(fc.array(setupArb, { minLength: 1, maxLength: 2 }), fc.array(fc.nat(100), { minLength: 6, maxLength: 6 }), (setups, positions) => {
        const w = new World();
        const joins: Op[] = NODES.map((_, i) => ({ kind: 'join', node: i }));
        const ops: Op[] = [...joins];
        setups.forEach((s, i) => ops.splice(positions[i]! % (ops.length + 1), 0, { kind: 'setup', ...s }));
        for (const op of ops) w.apply(op);
        for (const [ref, ds] of w.state.datasets) {
          expect(ds.mapper.unassignedShards(), `${ref} with ${ds.config.numShards} shards over ${NODES.length} nodes, min ${ds.config.minNumNodes}`).toEqual(
            [],
          );
        }
      }),
      { numRuns: 200 },
    );
  });

  it('a reassignment cooldown is never cut short, whatever the membership does', () => {
    // Errors on one shard, interleaved with joins, departures and time: every move of an errored
    // shard is checked against its recorded cooldown in World.checkEffects.
    const focused = fc.oneof(
      node.map((n) => ({ kind: 'join' as const, node: n })),
      node.map((n) => ({ kind: 'leave' as const, node: n })),
      fc.constant({ kind: 'report' as const, ds: 0, shard: 0, event: 'error' as const, pct: 0 }),
      fc.integer({ min: 0, max: COOLDOWN }).map((ms) => ({ kind: 'tick' as const, ms })),
      fc.constant({ kind: 'check' as const }),
    );
    fc.assert(
      fc.property(fc.array(focused, { maxLength: 60 }), (ops) => {
        const w = new World();
        w.apply({ kind: 'setup', ds: 0, log2Shards: 2, minNumNodes: 2 });
        for (const op of ops) w.apply(op);
      }),
      { numRuns: 300 },
    );
  });
});

describe('histories the properties found', () => {
  it('an errored shard leaving its cooldown on a cluster short of minNumNodes waits under the cap like the others (seed -1157045682)', () => {
    // 4 shards, minNumNodes 2 (a cap of 2 per node); n1 alone when its shard fails, n0 joins and
    // leaves again. At the cooldown's end the lone n1 took the errored shard as a third.
    const w = new World();
    w.apply({ kind: 'setup', ds: 0, log2Shards: 2, minNumNodes: 2 });
    const history: Op[] = [
      { kind: 'join', node: 1 },
      { kind: 'report', ds: 0, shard: 0, event: 'error', pct: 0 },
      { kind: 'join', node: 0 },
      { kind: 'tick', ms: 3165 },
      { kind: 'leave', node: 0 },
      { kind: 'tick', ms: 6836 },
      { kind: 'check' },
    ];
    for (const op of history) w.apply(op); // checkState after each step: at most the cap per node
    expect(w.state.datasets.get(DATASETS[0]!)!.mapper.numShardsForNode(nodeId('n1'))).toBe(2);
  });
});

describe('minimalEvents', () => {
  const eventArb = fc.record({
    shard: fc.nat(15),
    node: fc.constantFrom('a', 'b', 'c'),
    kind: fc.constantFrom('sas', 'rip', 'is', 'err', 'stop', 'down'),
    pct: fc.nat(100),
  });
  it('replayed into a fresh mapper give an equal mapper', () => {
    const ds = datasetRef('m');
    fc.assert(
      fc.property(fc.array(eventArb, { maxLength: 60 }), (events) => {
        const m = new ShardMapper(16, ds);
        for (const e of events) {
          const s = e.shard as ShardNum;
          const nd = nodeId(e.node);
          const ev = {
            sas: ShardEvents.assignmentStarted(ds, s, nd),
            rip: ShardEvents.recoveryInProgress(ds, s, nd, e.pct),
            is: ShardEvents.ingestionStarted(ds, s, nd),
            err: ShardEvents.ingestionError(ds, s, nd, `e${e.pct}`),
            stop: ShardEvents.ingestionStopped(ds, s, nd),
            down: ShardEvents.shardDown(ds, s, nd),
          }[e.kind];
          expect(m.updateFromEvent(ev).ok).toBe(true);
        }
        // The free-shard index agrees with the records, with and without a limit.
        const free = Array.from({ length: 16 }, (_, i) => i).filter((i) => m.nodeForShard(i) === undefined);
        expect(m.unassignedShards()).toEqual(free);
        expect(m.unassignedShards(3)).toEqual(free.slice(0, 3));
        expect(m.numUnassignedShards).toBe(free.length);
        const replay = new ShardMapper(16, ds);
        for (const e of m.minimalEvents()) expect(replay.updateFromEvent(e).ok).toBe(true);
        expect(replay.equals(m)).toBe(true);
        expect(replay.minimalEvents()).toEqual(m.minimalEvents());
      }),
      { numRuns: 500 },
    );
  });
});
