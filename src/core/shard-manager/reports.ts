import { isShardInRange, type DatasetRef, type NodeId, type ShardNum } from '../ids.js';
import { compareTokens, tokenText, type FencingToken } from '../fencing-token.js';
import { isoInstant } from '../instant.js';
import { boundedMessage, NODE_REPORTED_EVENTS, ShardEvents, type ShardEvent } from '../status.js';
import { roundUnlessSettling } from './settle-window.js';
import type { Steps } from '../steps.js';
import type { NodeReportBody } from './protocol.js';
import type { Step } from './step.js';

/**
 * Nodes' reports (one, or a lot that arrived together), each applied in order (`applyReport`). The
 * rounds that copies catching up ask for run once, after all of them: a report brings many events
 * (a node batches them), a lot of reports hundreds, and each round looks at every move in flight
 * (with 1024 moves in flight, a round per report held the singleton for 200 ms per lot: issue 34).
 */
export function* nodeReports(step: Step, reports: readonly NodeReportBody[]): Steps<void> {
  const roundsWanted = new Set<DatasetRef>();
  let sinceStep = 0;
  for (const r of reports) {
    yield* applyReport(step, r, roundsWanted);
    // A lot of reports of a large setup brings tens of thousands of events.
    sinceStep += r.events.length;
    if (sinceStep >= EVENTS_PER_STEP) {
      sinceStep = 0;
      yield;
    }
  }
  for (const ref of roundsWanted) yield* roundUnlessSettling(step, ref);
}

/** Reported events applied between two steps: about 5–10 ms of a cold process's work. */
const EVENTS_PER_STEP = 2048;

/**
 * A node's report: applied only from the owner's current incarnation, then acknowledged. The ack
 * is emitted after the changes' persist and publish effects, so a node stops resending only once
 * the singleton has made its events durable and visible. A refused event is acknowledged too (it
 * will never become acceptable by resending) and explained in a `report.rejected` notice.
 */
function* applyReport(step: Step, { node, incarnation, seq, events }: NodeReportBody, roundsWanted: Set<DatasetRef>): Steps<void> {
  const member = step.member(node);
  if (!member || member.incarnation !== incarnation) {
    const why = member ? `is incarnation ${incarnation}, the member is incarnation ${member.incarnation}` : 'is not a member';
    // Expected after a restart or a failover (a dead incarnation's reports are replayed): info, not a warning.
    step.notice({ name: 'report.rejected', level: 'info', node, message: `report ${seq} from ${node} refused: the sender ${why}` });
  } else {
    for (const e of events) {
      if (e.type !== 'IngestionError') {
        if (yield* applyReported(step, node, e)) roundsWanted.add(e.dataset);
        continue;
      }
      // An error's text is cut as the map keeps it, so the changes carry what the map says; its
      // token only says which assignment failed, and is not part of the map's event.
      const { token, ...error } = e;
      const stale = token && staleAssignment(step, error, token);
      if (stale)
        step.notice({
          name: 'report.rejected',
          level: 'info',
          dataset: e.dataset,
          shard: e.shard,
          node,
          message: `IngestionError for ${e.dataset}/${e.shard} from ${node} ignored: ${stale}`,
        });
      else yield* applyReported(step, node, { ...error, error: boundedMessage(error.error) });
    }
  }
  step.ack({ type: 'AckReport', node, incarnation, seq });
}

/**
 * Why an error report speaks of an assignment the copy no longer has, if it does: the map gave the
 * copy a newer one since (this singleton's epoch, or a newer assignment version), for instance a
 * recovering singleton started the copy again before the report of its former failure reached it.
 * Acting on it would take the copy from a node that now runs it under the newer assignment.
 */
function staleAssignment(step: Step, e: ShardEvent, token: FencingToken): string | undefined {
  const ds = step.dataset(e.dataset);
  if (!ds || !isShardInRange(e.shard, ds.config.numShards) || !ds.mapper.copyOnNode(e.shard, e.node)) return undefined;
  const current: FencingToken = { epoch: step.epoch, version: ds.mapper.assignmentVersion(e.shard) };
  if (compareTokens(token, current) >= 0) return undefined;
  return `it reports a failure under assignment ${tokenText(token)}, and the copy has had assignment ${tokenText(current)} since`;
}

function refusal(step: Step, node: NodeId, e: ShardEvent): string | undefined {
  if (e.node !== node) return `it names node ${e.node}`;
  if (!NODE_REPORTED_EVENTS.has(e.type)) return `only the singleton emits ${e.type}`;
  const ds = step.dataset(e.dataset);
  if (!ds) return `dataset ${e.dataset} is unknown`;
  if (!isShardInRange(e.shard, ds.config.numShards)) return `shard ${e.shard} is out of range 0..${ds.config.numShards - 1}`;
  if (e.type === 'RecoveryInProgress' && !(e.progressPct >= 0 && e.progressPct <= 100)) return `progress ${e.progressPct} is not within 0..100`;
  if (ds.mapper.copyOnNode(e.shard, node)) return undefined;
  const holders = ds.mapper.nodesForShard(e.shard);
  return holders.length === 0 ? 'the shard has no owner' : `the shard is owned by ${holders.join(', ')}`;
}

/** Applies a node's event; true when it asks for a round (a copy caught up while moves are under way). */
function* applyReported(step: Step, node: NodeId, e: ShardEvent): Steps<boolean> {
  const why = refusal(step, node, e);
  if (why !== undefined) {
    step.notice({
      name: 'report.rejected',
      level: 'warn',
      dataset: e.dataset,
      shard: e.shard,
      node,
      message: `${e.type} for ${e.dataset}/${e.shard} from ${node} ignored: ${why}`,
    });
    return false;
  }
  const changed = step.apply(e.dataset, e);
  if (changed && e.type === 'IngestionError') {
    // The failed copy changes what a round would plan: the moves left waiting are planned again.
    step.setWaitingMoves(e.dataset, undefined);
    yield* reassignAfterError(step, e.dataset, e.shard, node, e.error);
  }
  // A new copy caught up: its Leaving predecessor can go, and the next planned moves can start.
  return (
    changed &&
    e.type === 'IngestionStarted' &&
    (step.movesWaiting(e.dataset) ||
      step
        .dataset(e.dataset)!
        .mapper.recordForShard(e.shard)
        .assignments.some((a) => a.placement === 'Leaving'))
  );
}

/**
 * Moves an errored shard to another node, at most once per cooldown. Never inside the cooldown: a
 * poison record would bounce the shard around the cluster, failing on every node in turn. The
 * shard then waits, unassigned and in Error, until the cooldown ends (a `ScheduleCheck`). The new
 * copy of a drain's move that fails starts the cooldown too, and the drained node's copy serves.
 */
function* reassignAfterError(step: Step, dataset: ShardEvent['dataset'], shard: ShardNum, reporter: NodeId, error: string): Steps<void> {
  yield* moveErroredShard(step, dataset, shard, reporter, error);
  yield* fillFreedRoom(step, dataset, shard);
}

/**
 * The failed copy left its node with room, and the round that moved the shard kept the reporter
 * out for every shard: a shard left free for want of room (a lost node's, say) gets that room now,
 * not at the next membership change (sim seed 7905: a shard free for 4.7 s beside two members with
 * room). Only once the errored shard has a copy elsewhere (moved, or its drain's old copy serves):
 * while it waits for its cooldown, the room stays its own, or it would come back over the cap.
 */
function* fillFreedRoom(step: Step, dataset: DatasetRef, shard: ShardNum): Steps<void> {
  const ds = step.dataset(dataset)!;
  if (ds.config.strategy === 'balanced') return; // a balanced round places every free copy already
  if (ds.mapper.recordForShard(shard).assignments.length === 0) return;
  const held = step.held(dataset).add(shard);
  if (ds.mapper.unassignedShards().some((s) => !held.has(s))) yield* step.assignShards(dataset, { hold: held });
}

function* moveErroredShard(step: Step, dataset: DatasetRef, shard: ShardNum, reporter: NodeId, error: string): Steps<void> {
  const skipped = (message: string) => step.notice({ name: 'shard.reassignment-skipped', level: 'warn', dataset, shard, node: reporter, message });
  const last = step.dataset(dataset)!.cooldowns.get(shard);
  if (last !== undefined && step.inCooldown(last)) {
    const until = step.cooldownEnd(last);
    step.schedule(until);
    skipped(`${dataset}/${shard} failed again on ${reporter} (${error}); it stays unassigned until its cooldown ends at ${isoInstant(until)} (${until})`);
    return;
  }
  // The failed copy was a drain's new copy (FiloDB's strategy): the old one still serves, and the
  // move is tried again once the cooldown ends (`startDrainMoves`), not at once: the round would
  // hand the shard to the same node again, and it would fail again, for ever.
  const ds = step.dataset(dataset)!;
  const leaving = ds.config.strategy === 'balanced' ? undefined : ds.mapper.recordForShard(shard).assignments.find((a) => a.placement === 'Leaving');
  if (leaving !== undefined) {
    step.setCooldown(dataset, shard, step.now);
    const until = step.cooldownEnd(step.now);
    step.schedule(until);
    skipped(
      `${dataset}/${shard} failed on ${reporter} (${error}) while moving there from ${leaving.node}; ${leaving.node} serves it, and the move is tried again after its cooldown, at ${isoInstant(until)} (${until})`,
    );
    return;
  }
  const placed = yield* step.assignShards(dataset, { exclude: reporter });
  if (placed.includes(shard)) {
    step.setCooldown(dataset, shard, step.now);
    const to = step.dataset(dataset)!.mapper.nodeForShard(shard);
    step.notice({
      name: 'shard.reassigned',
      level: 'warn',
      dataset,
      shard,
      node: reporter,
      message: `${dataset}/${shard} moved from ${reporter} to ${to} after an ingestion error: ${error}`,
    });
  } else {
    // Without a cooldown nothing would ever place it again (the sim found shards that stayed
    // unassigned for good): once it ends, `checkCooldowns` tries every node, the reporter too.
    step.setCooldown(dataset, shard, step.now);
    const until = step.cooldownEnd(step.now);
    step.schedule(until);
    skipped(
      `${dataset}/${shard} failed on ${reporter} (${error}) and no other node has room for it; it is tried again after its cooldown, at ${isoInstant(until)} (${until})`,
    );
  }
}

/**
 * Places errored shards whose cooldown has ended, and nothing else, after trying again the drain
 * moves whose new copy failed (`retryFailedDrainMoves`). One still waiting is checked
 * again at its cooldown's end: the check may come a moment early by the clock `now` comes from (see
 * `endSettleWindows`), and no other check would come for it.
 */
export function* checkCooldowns(step: Step): Steps<void> {
  for (const ref of step.datasetRefs()) {
    yield* retryFailedDrainMoves(step, ref);
    const ds = step.dataset(ref)!;
    const waiting = (s: number) => waitsForCooldown(ds, s);
    for (const [s, at] of ds.cooldowns) if (step.inCooldown(at) && waiting(s)) step.schedule(step.cooldownEnd(at));
    const ended = [...ds.cooldowns].filter(([s, at]) => !step.inCooldown(at) && waiting(s));
    if (ended.length === 0) continue;
    const endedShards = new Set(ended.map(([s]) => s));
    const stillCooling = [...ds.cooldowns].filter(([s, at]) => step.inCooldown(at) && waiting(s)).map(([s]) => s);
    const hold = new Set<number>([...ds.mapper.unassignedShards().filter((s) => !endedShards.has(s)), ...stillCooling]);
    const placed = yield* step.assignShards(ref, { hold });
    for (const s of placed) {
      step.notice({
        name: 'shard.cooldown-ended',
        level: 'info',
        dataset: ref,
        shard: s,
        message: `${ref}/${s} left its cooldown and was assigned to ${step.dataset(ref)!.mapper.nodeForShard(s)}`,
      });
    }
    for (const s of endedShards) if (!placed.includes(s as ShardNum)) placeOnLeastLoaded(step, ref, s as ShardNum);
  }
}

/**
 * An errored shard of FiloDB's strategy that left its cooldown and still finds no member with room:
 * FiloDB sizes by `minNumNodes`, and once failures have spread a dataset over more owners than that,
 * it gives no member room at all, so the shard would stay unassigned for good (the simulator found
 * it: seeds 7315, 8084). Nothing is left unassigned over a sizing rule: the member with the fewest
 * of the dataset's shards (the newest on a tie) takes it, as a drained member takes what no other
 * has room for. Only with `minNumNodes` members at least: with fewer, the dataset is short of the
 * nodes it asked for, and its shards wait for them under FiloDB's cap, the errored one as any other
 * (a lone member took a third shard of a 4-shard dataset of minNumNodes 2, over its cap of 2: the
 * core's property test, seed -1157045682).
 */
function placeOnLeastLoaded(step: Step, ref: DatasetRef, shard: ShardNum): void {
  const ds = step.dataset(ref)!;
  if (ds.config.strategy === 'balanced' || ds.mapper.recordForShard(shard).assignments.length > 0 || ds.mapper.statusForShard(shard).type !== 'Error') return;
  const members = step
    .placeableMembers()
    .map((m) => m.node)
    .reverse();
  if (members.length === 0 || members.length < ds.config.minNumNodes) return;
  const node = members.reduce((best, n) => (ds.mapper.numShardsForNode(n) < ds.mapper.numShardsForNode(best) ? n : best));
  step.apply(ref, ShardEvents.assignmentStarted(ref, shard, node));
  step.notice({
    name: 'shard.reassigned',
    level: 'warn',
    dataset: ref,
    shard,
    node,
    message: `${ref}/${shard} left its cooldown and no member has room for it by FiloDB's sizing (more owners than minNumNodes): ${node}, the least loaded, takes it`,
  });
}

/**
 * Moves off a drained node whose new copy failed wait for the shard's cooldown (`startDrainMoves`);
 * once it ended, they are tried again, in a round that places no unassigned shard.
 */
function* retryFailedDrainMoves(step: Step, ref: DatasetRef): Steps<void> {
  const ds = step.dataset(ref)!;
  if (ds.config.strategy === 'balanced' || step.draining.size === 0) return;
  const moveWaiting = (s: number) => ds.mapper.recordForShard(s).assignments.some((a) => a.placement === 'Leaving' && step.draining.has(a.node));
  if (![...ds.cooldowns].some(([s, at]) => !step.inCooldown(at) && moveWaiting(s))) return;
  yield* step.assignShards(ref, { hold: new Set(ds.mapper.unassignedShards()) });
}

/** The next `ScheduleCheck` times for every shard held in a cooldown. */
export function scheduleHeldShards(step: Step): void {
  for (const ref of step.datasetRefs()) {
    const ds = step.dataset(ref)!;
    for (const [s, at] of ds.cooldowns) {
      if (!waitsForCooldown(ds, s)) continue;
      // A cooldown that ended while no singleton acted is checked at once: the check its
      // predecessor scheduled died with it, and nothing else would place the shard (sim seed 2514:
      // a shard failed with no room anywhere, its cooldown ended during a failover, and it stayed
      // unassigned for good).
      step.schedule(step.inCooldown(at) ? step.cooldownEnd(at) : step.now);
    }
  }
}

/**
 * Waiting for its cooldown: an errored shard without a copy, or a replicated one that lost the copy
 * that failed and has fewer than its copies (its other copies serve meanwhile; nothing else would
 * place the missing one once the cooldown is over: the sim found shards left short).
 */
function waitsForCooldown(ds: NonNullable<ReturnType<Step['dataset']>>, shard: number): boolean {
  const copies = ds.mapper.recordForShard(shard).assignments.length;
  if (copies === 0) return ds.mapper.statusForShard(shard).type === 'Error';
  return copies < ds.config.replicationFactor;
}
