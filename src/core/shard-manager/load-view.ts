// A load-aware dataset's load view as the singleton holds it (docs/PLACEMENT.md, "Load reports"):
// each shard's last figure, which figures are fresh, whether enough are to balance by, and each
// node's load over its weighted share. Pure reads of the state: the load round decides with them,
// and the singleton's node exports the ratios (`shardherd_load_node_ratio`) from the same code.
import type { DatasetConfig } from '../dataset-config.js';
import type { DatasetRef, NodeId } from '../ids.js';
import { countedLoads } from '../placement/load-aware-strategy.js';
import type { ShardMapper } from '../shard-mapper.js';
import type { LoadRefusal, Member } from './protocol.js';
import type { ShardManagerState } from './step.js';

/**
 * A load-aware dataset's load view and its record of load moves. The view is not persisted (a new
 * singleton rebuilds it from the next reports); the moves are, with the node operations (`loadMoves`).
 */
export interface DatasetLoad {
  /** Per shard: the configured measure from its last report by a serving copy (NaN: none yet). */
  readonly values: Float64Array;
  /** Per shard: when that report arrived (the singleton's clock, ms). */
  readonly at: Float64Array;
  /** Since when some node has been outside the trigger band (ms), if it is. */
  readonly imbalancedSince: number | undefined;
  /** Copies moved by load rounds, one entry per copy: what the hourly limit and the shard cooldown count (persisted). */
  readonly moved: readonly { readonly shard: number; readonly at: number }[];
  /** Figures refused since this singleton took over, by why. */
  readonly refused: Readonly<Partial<Record<LoadRefusal, number>>>;
  /** When a load round last searched and found no move that helps (it searches again `sustainMs` later). */
  readonly noGainAt?: number | undefined;
  /**
   * The last load round's plan was cut short by a limit (the hour's moves, the moves at once): the
   * next round goes on with it once it may, without waiting for the trigger band and `sustainMs`
   * again, so the limits spread a plan over rounds instead of stopping it short of the band.
   */
  readonly unfinished?: boolean | undefined;
  /**
   * This singleton recovered the dataset serving, with no figures yet: until then (its takeover plus
   * `staleMs`) a round with an incomplete view places lost copies only, rather than even out copy
   * counts and undo the load's placement before the nodes have reported.
   */
  readonly awaitingReportsUntil?: number | undefined;
  /**
   * The members that could take copies when the wait began: if they differ when it ends (a node
   * joined or was drained meanwhile), the round their change called for runs then, by load.
   */
  readonly awaitingMembers?: readonly NodeId[] | undefined;
}

/** Shards with a fresh figure, of those served, for rounds to balance by load (else they place lost copies only). */
export const COMPLETE_VIEW = 0.9;

export function emptyLoad(shards: number): DatasetLoad {
  return { values: new Float64Array(shards).fill(Number.NaN), at: new Float64Array(shards), imbalancedSince: undefined, moved: [], refused: {} };
}

/** Each shard's fresh figure (undefined: none fresh), and how many served shards have one. */
export interface FreshView {
  readonly loads: (number | undefined)[];
  readonly measured: number;
  readonly serving: number;
}

/** The figures of `load` no older than the dataset's `staleMs` at `now`. */
export function freshView(config: DatasetConfig, mapper: ShardMapper, load: DatasetLoad | undefined, now: number): FreshView {
  const staleMs = config.loadBalance!.staleMs;
  const loads = new Array<number | undefined>(config.numShards);
  let measured = 0;
  let serving = 0;
  for (let s = 0; s < config.numShards; s++) {
    const fresh = load !== undefined && !Number.isNaN(load.values[s]!) && now - load.at[s]! <= staleMs;
    loads[s] = fresh ? load.values[s] : undefined;
    if (mapper.servingNodes(s).length === 0) continue;
    serving += 1;
    if (fresh) measured += 1;
  }
  return { loads, measured, serving };
}

/** Whether enough served shards have a fresh figure to balance by load. */
export const complete = (view: { readonly measured: number; readonly serving: number }) => view.serving > 0 && view.measured >= COMPLETE_VIEW * view.serving;

/**
 * Each member's load (its copies' figures, an unmeasured shard counted as the strategy counts it)
 * over its plain weighted share, λ·w with λ the load per unit of weight over all of them: 1 is its
 * share exactly. When nothing carries load every member is at its share (1).
 */
export function nodeLoadRatios(config: DatasetConfig, mapper: ShardMapper, view: FreshView, members: readonly Member[]): Map<NodeId, number> {
  const loads = countedLoads(view.loads, config.numShards);
  const load = new Map<NodeId, number>(members.map((m) => [m.node, 0]));
  for (let s = 0; s < config.numShards; s++) {
    for (const n of mapper.nodesForShard(s)) if (load.has(n)) load.set(n, load.get(n)! + loads[s]!);
  }
  const total = [...load.values()].reduce((a, b) => a + b, 0);
  const weight = members.reduce((a, m) => a + (m.weight ?? 1), 0);
  return new Map(members.map((m) => [m.node, total === 0 ? 1 : (load.get(m.node)! * weight) / (total * (m.weight ?? 1))]));
}

/** One member's load over its weighted share in one dataset's load view. */
export interface NodeLoadRatio {
  readonly dataset: DatasetRef;
  readonly node: NodeId;
  readonly ratio: number;
}

/**
 * Every member's load over its weighted share, per load-aware dataset whose view is complete at
 * `now` (the others have none): what the singleton's load round sees, members being drained left out.
 */
export function loadRatios(state: ShardManagerState, now: number): NodeLoadRatio[] {
  const members = state.members.filter((m) => !state.operations.draining.includes(m.node));
  const out: NodeLoadRatio[] = [];
  for (const [dataset, { config, mapper }] of state.datasets) {
    if (config.loadBalance === undefined) continue;
    const view = freshView(config, mapper, state.loads.get(dataset), now);
    if (!complete(view)) continue;
    for (const [node, ratio] of nodeLoadRatios(config, mapper, view, members)) out.push({ dataset, node, ratio });
  }
  return out;
}
