// What operators see of a load-aware dataset and how they steer it: `ExplainPlacement` (each node
// against its band, the verdict, and the moves a round would make now, with why: a dry run) and
// `SetLoadBalancing` (pausing or resuming its moves for load, persisted with the node operations).
import type { Steps } from '../steps.js';
import type { DatasetRef, NodeId, ReplyTo } from '../ids.js';
import type { LoadMove, NodeLoad, PlacementExplanation } from './protocol.js';
import type { Step } from './step.js';
import { loadOf, movesOf, planLoadRound, viewOf } from './load-balancing.js';

/** Answers `ExplainPlacement`: the view, the bands, and the dry run of a load round now. */
export function* explainPlacement(step: Step, ref: DatasetRef, replyTo: ReplyTo): Steps<void> {
  const ds = step.dataset(ref);
  if (!ds) return step.reply(replyTo, { type: 'DatasetUnknown', dataset: ref });
  const lb = ds.config.loadBalance;
  if (lb === undefined) return step.reply(replyTo, notLoadAware(ref));
  const plan = yield* planLoadRound(step, ref, true);
  const load = loadOf(step, ref);
  const report = plan.decision?.report;
  const order = plan.decision?.nodeOrder ?? [];
  const copies = (node: NodeId) => plan.current.reduce((n, c) => n + (c.includes(node) ? 1 : 0), 0);
  const nodes: NodeLoad[] = order.map((node, i) => {
    const band = report!.nodes[i]!;
    return {
      node,
      weight: step.member(node)?.weight ?? 1,
      copies: copies(node),
      load: band.before,
      share: band.share,
      lo: band.lo,
      hi: band.hi,
      ...(band.hotShard === undefined ? {} : { hotShard: band.hotShard }),
    };
  });
  const byNode = new Map(nodes.map((n) => [n.node, n]));
  const view = viewOf(step, ref);
  const moves: LoadMove[] = plan.decision === undefined ? [] : movesOf(plan.current, plan.decision.placement).map((m) => moveWithWhy(m, view.loads, byNode));
  const explanation: PlacementExplanation = {
    dataset: ref,
    measure: lb.measure,
    band: lb.band,
    triggerBand: lb.triggerBand,
    paused: step.paused(ref),
    measured: plan.view.measured,
    serving: plan.view.serving,
    nodes,
    hotShards: report?.hotShards ?? [],
    ...(plan.imbalancedSince === undefined ? {} : { imbalancedSince: plan.imbalancedSince }),
    movesLastHour: plan.movesLastHour,
    maxMovesPerHour: lb.maxMovesPerHour,
    maxConcurrentMoves: ds.config.maxConcurrentMoves,
    maxConcurrentMovesPerNode: lb.maxConcurrentMovesPerNode,
    refused: load.refused,
    verdict: plan.verdict,
    message: plan.message,
    moves,
    outsideBefore: report?.outsideBefore ?? 0,
    outsideAfter: report?.outsideAfter ?? 0,
  };
  step.reply(replyTo, { type: 'PlacementExplanation', explanation });
}

/** One planned move with the reason an operator reads: how far outside its band the node it leaves (or joins) was. */
function moveWithWhy(
  m: { shard: number; from: NodeId | undefined; to: NodeId },
  loads: readonly (number | undefined)[],
  byNode: ReadonlyMap<NodeId, NodeLoad>,
): LoadMove {
  const from = m.from === undefined ? undefined : byNode.get(m.from);
  const to = byNode.get(m.to);
  const rel = (n: NodeLoad) => `${(n.load / n.share).toFixed(2)} × its share (band ${(n.lo / n.share).toFixed(2)}–${(n.hi / n.share).toFixed(2)})`;
  const why =
    from === undefined
      ? `a lost copy placed on ${m.to}`
      : from.hotShard !== undefined && from.hotShard !== m.shard
        ? `${from.node} carries hot shard ${from.hotShard} alone (${rel(from)})`
        : from.load > from.hi
          ? `${from.node} was over its band: ${rel(from)}`
          : to !== undefined && to.load < to.lo
            ? `${to.node} was under its band: ${rel(to)}`
            : `part of a swap or chain that lowers the load outside the band (${from.node} ${rel(from)})`;
  return { shard: m.shard, from: m.from ?? m.to, to: m.to, load: loads[m.shard] ?? Number.NaN, why };
}

const notLoadAware = (dataset: DatasetRef) =>
  ({
    type: 'NotLoadAware',
    dataset,
    message: `dataset ${dataset} places by copy counts: set "loadBalance" in its config (with "strategy": "balanced") to place it by measured load`,
  }) as const;

/** `SetLoadBalancing`: pauses or resumes a dataset's moves for load alone (persisted with the node operations). */
export function setLoadBalancing(step: Step, ref: DatasetRef, paused: boolean, replyTo: ReplyTo): void {
  const ds = step.dataset(ref);
  if (!ds) return step.reply(replyTo, { type: 'DatasetUnknown', dataset: ref });
  if (ds.config.loadBalance === undefined) return step.reply(replyTo, notLoadAware(ref));
  if (paused !== step.paused(ref)) {
    step.setPaused(ref, paused);
    step.notice({ name: 'load.paused', level: 'info', dataset: ref, message: `${ref}: moves for load ${paused ? 'paused' : 'resumed'} by an operator` });
  }
  step.reply(replyTo, { type: 'LoadBalancingSet', dataset: ref, paused });
}
