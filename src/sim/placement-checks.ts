// The simulator's checks of replicas and planned moves, as pure functions over stored maps:
// I1 (who may ingest a shard), I2 for copies kept for lost nodes, I7 (no planned move leaves a shard
// unserved), I8 (isolation and no duplicates) and I9 (balanced datasets reach the spread lower
// bound once quiet).
import type { ShardMapper } from '../core/shard-mapper.js';
import { isServingCopy } from '../core/shard-record.js';

/**
 * I1: whether a live node may be ingesting a shard: it holds a copy in the singleton's map now, or
 * the singleton declared one on it recently (a handoff's old copy, or a new copy the move dropped
 * again, ingests until it hears of its removal, which a lost or delayed message can put off until
 * the next periodic snapshot). Anything else is a second, undeclared ingestion.
 */
export function mayIngest(now: ShardMapper, shard: number, node: string, declaredRecently: (shard: number, node: string) => boolean): boolean {
  return now.nodesForShard(shard).includes(node as never) || declaredRecently(shard, node);
}

/** Every copy a map declares, as `shard/node` keys. */
export function declaredCopies(map: ShardMapper): string[] {
  const out: string[] = [];
  for (let s = 0; s < map.numShards; s++) for (const a of map.recordForShard(s).assignments) out.push(`${s}/${a.node}`);
  return out;
}

/**
 * I7: shards that had a serving copy in the previous persisted map and have none now, a serving copy
 * dropped although every node that served them is still the same live member: only a planned move
 * could have done that.
 * `sameMember(node, shard)` says whether the node is still a member with the incarnation that held
 * its copy of the shard.
 */
export function unservedByPlannedMoves(
  previous: ShardMapper,
  now: ShardMapper,
  sameMember: (node: string, shard: number) => boolean,
  exempt: (shard: number) => boolean,
): string[] {
  const out: string[] = [];
  const show = (m: ShardMapper, s: number) =>
    m
      .recordForShard(s)
      .assignments.map((a) => `${a.node}:${a.placement}/${a.status.type}`)
      .join(' ') || 'none';
  for (let s = 0; s < Math.min(previous.numShards, now.numShards); s++) {
    const before = previous
      .recordForShard(s)
      .assignments.filter(isServingCopy)
      .map((a) => a.node);
    if (before.length === 0 || exempt(s)) continue;
    const copies = now.recordForShard(s).assignments;
    if (copies.some(isServingCopy)) continue;
    // The singleton dropped a copy that served, its holder alive: the move took the last server.
    // (A copy still held whose node reports it recovering is the node's doing, not the move's.)
    const dropped = before.some((node) => !copies.some((a) => a.node === node));
    if (dropped && before.every((node) => sameMember(node, s))) out.push(`${s} (was ${show(previous, s)}, now ${show(now, s)})`);
  }
  return out;
}

/**
 * I8: shards whose staying copies (not Leaving) share a rack while the members span enough racks
 * for them all, and shards with two copies on one node. `rackOf` gives a member's isolation group.
 */
export function isolationViolations(map: ShardMapper, rackOf: (node: string) => string, racksAvailable: number): string[] {
  const out: string[] = [];
  for (let s = 0; s < map.numShards; s++) {
    const copies = map.recordForShard(s).assignments;
    const nodes = copies.map((a) => a.node);
    if (new Set(nodes).size !== nodes.length) out.push(`shard ${s} has two copies on one node: ${nodes.join(', ')}`);
    const staying = copies.filter((a) => a.placement !== 'Leaving');
    const distinct = new Set(staying.map((a) => rackOf(a.node))).size;
    if (distinct < Math.min(staying.length, racksAvailable)) {
      out.push(`shard ${s} has copies in racks ${staying.map((a) => `${rackOf(a.node)} (${a.node}, ${a.placement})`).join(', ')}`);
    }
  }
  return out;
}

/**
 * I2 for a balanced dataset's copies on nodes that are not members: each must be one kept for its
 * lost node (Down, so nobody runs it) and only within its replacement delay plus `boundMs` (the
 * settle window, the timer's and the round's own latency); and no member holds a Down copy (a node
 * that came back restarts what was kept for it). `departedAt` is when a node's delay can have
 * started: when it was last seen leaving, or later, when the singleton acting now took over.
 * Returns the violations and whether any copy is still kept (the dataset is not at rest then).
 */
export function keptCopyViolations(
  map: ShardMapper,
  isMember: (node: string) => boolean,
  departedAt: (node: string) => number | undefined,
  now: number,
  replacementDelayMs: number,
  boundMs: number,
): { readonly violations: string[]; readonly kept: boolean } {
  const violations: string[] = [];
  let kept = false;
  for (let s = 0; s < map.numShards; s++) {
    for (const a of map.recordForShard(s).assignments) {
      if (isMember(a.node)) {
        if (a.status.type === 'Down') violations.push(`shard ${s}: member ${a.node} holds a copy kept Down, which nobody runs`);
        continue;
      }
      const since = departedAt(a.node);
      if (a.status.type !== 'Down') violations.push(`shard ${s}: ${a.node} is not a member and its copy is ${a.status.type}, not kept Down`);
      else if (since === undefined || now - since > replacementDelayMs + boundMs)
        violations.push(
          `shard ${s}: ${a.node}'s copy is still kept ${since === undefined ? '(never seen leaving)' : `${now - since} ms after it left (or the acting singleton took over)`}, beyond replacementDelayMs ${replacementDelayMs} + ${boundMs}`,
        );
      else kept = true;
    }
  }
  return { violations, kept };
}
