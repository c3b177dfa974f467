// What the simulator learns from every map the singleton persists (seen on the way into the
// MetaStore: maps are persisted before anyone hears of them, so a handoff that starts and ends
// within one step counts too): which copies were declared until when (for I1), when each copy was
// placed and I7 on every map, the RF-1 datasets' planned handoffs (for I15), and the maps' versions
// for I16.
import type { DatasetRef } from '../core/ids.js';
import { ShardMapper } from '../core/shard-mapper.js';
import { declaredCopies, unservedByPlannedMoves } from './placement-checks.js';
import { HandoffWindows } from './handoffs.js';
import { REMOVAL_GRACE_MS, type SimWorld } from './world.js';

export class MapWatch {
  /**
   * Every copy the singleton declares, with until when it did (I1). A copy counts as declared until
   * the first map without it: its node's grace to hear of the removal starts then, not at the last
   * map that still had it.
   */
  private readonly declared = new Map<string, number>();
  private readonly declaredNow = new Map<DatasetRef, string[]>();
  // When each copy was placed (it has been in every map of its dataset since), for I7.
  private readonly placedAt = new Map<string, number>();
  // When each node was first seen (at a persisted map) with an incarnation other than its earlier
  // one. A copy placed before that may belong to the earlier incarnation: the singleton can still
  // show it in a map written after the restart (it has not heard of it yet), and dropping it then
  // is the crash's doing, not a planned move's.
  private readonly incarnations = new Map<string, { incarnation: string; since: number }>();
  private readonly persisted = new Map<DatasetRef, { map: ShardMapper; members: Map<string, string> }>();
  // With the detector's 6 s session a paused singleton (up to 2.5 s) keeps its role, and publishes
  // the change that removed a copy only when it runs again: the copy's node hears of it that much later.
  readonly removalGraceMs: number;
  /** The RF-1 datasets' planned handoffs, for I15. */
  readonly handoffs: HandoffWindows;

  constructor(private readonly w: SimWorld) {
    this.removalGraceMs = REMOVAL_GRACE_MS + (w.detector ? 2_500 : 0);
    this.handoffs = new HandoffWindows(this.removalGraceMs);
  }

  /** Watches every map the MetaStore persists from now on. */
  install(): void {
    const { metaStore, clock, reports } = this.w;
    const putShardMap = metaStore.putShardMap.bind(metaStore);
    metaStore.putShardMap = async (snapshot) => {
      await putShardMap(snapshot);
      reports.map(clock.now(), snapshot.dataset, snapshot.epoch, snapshot.assignmentVersions ?? []);
      const map = ShardMapper.fromSnapshot(snapshot);
      const keys = declaredCopies(map).map((key) => `${snapshot.dataset}/${key}`);
      const before = this.declaredNow.get(snapshot.dataset) ?? [];
      for (const key of [...before, ...keys]) this.declared.set(key, clock.now());
      this.declaredNow.set(snapshot.dataset, keys);
      for (const key of keys) if (!this.placedAt.has(key)) this.placedAt.set(key, clock.now());
      this.checkPlannedMoves(snapshot.dataset, map);
      this.handoffs.noteMap(snapshot.dataset, map, clock.now());
      const kept = new Set(keys);
      for (const key of before) if (!kept.has(key)) this.placedAt.delete(key);
    };
  }

  /** Whether the singleton declared a copy of `dataset`'s `shard` on `node` within the removal grace (I1). */
  declaredRecently(dataset: string): (shard: number, node: string) => boolean {
    return (shard: number, node: string) => this.w.clock.now() - (this.declared.get(`${dataset}/${shard}/${node}`) ?? -Infinity) <= this.removalGraceMs;
  }

  private noteIncarnations(members: ReadonlyMap<string, string>): void {
    for (const [node, incarnation] of members) {
      const seen = this.incarnations.get(node);
      if (seen?.incarnation !== incarnation) this.incarnations.set(node, { incarnation, since: seen ? this.w.clock.now() : -Infinity });
    }
  }

  // I7 on every persisted map, not once a step: a handoff that completes and whose new copy then
  // dies within one step is a forced loss, which only the maps in between can tell apart.
  private checkPlannedMoves(ref: DatasetRef, now: ShardMapper): void {
    const { poison, sinkFaults, detector: world } = this.w;
    const members = this.w.memberIncarnations();
    this.noteIncarnations(members);
    const last = this.persisted.get(ref);
    this.persisted.set(ref, { map: now, members });
    if (!last) return;
    const moving = (shard: number) => [last.map, now].some((m) => m.recordForShard(shard).assignments.some((a) => a.placement === 'Leaving'));
    const exempt = (shard: number) => !moving(shard) || poison.has(`${ref}/${shard}`) || sinkFaults?.faulted(ref, shard) === true;
    // (An incarnation the detector took out is gone, as a crashed one, whatever the group still says.)
    const same = (node: string, shard: number) =>
      members.get(node) !== undefined &&
      members.get(node) === last.members.get(node) &&
      this.incarnations.get(node)!.since < this.placedAt.get(`${ref}/${shard}/${node}`)! &&
      !world?.wasRemoved(`${node}@${members.get(node)}`);
    const lost = unservedByPlannedMoves(last.map, now, same, exempt);
    if (lost.length > 0) this.w.record.violate('I7', `${ref}: shards ${lost.join(',')} lost their last serving copy in a planned move`);
  }
}
