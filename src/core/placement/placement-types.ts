import type { NodeId } from '../ids.js';
import type { Result } from '../result.js';
import type { Steps } from '../steps.js';

/** A node as a placement strategy sees it: its isolation group (rack or zone) and its weight. */
export interface PlacementNode {
  readonly id: NodeId;
  /** Isolation group: a shard's copies go to distinct groups whenever RF ≤ number of groups. */
  readonly group: string;
  /** Relative capacity (> 0); a node of weight 2 is given twice the copies of a node of weight 1. */
  readonly weight: number;
  /**
   * Away within its replacement delay: the node keeps the copies it holds (they count toward their
   * shards' copies and use its group) and receives no new copy; it takes no part in the shares.
   */
  readonly absent?: boolean;
}

/** Everything a whole-map placement strategy decides from. Plain data; any order of nodes and of copies. */
export interface PlacementInput {
  readonly numShards: number;
  readonly replicationFactor: number;
  /** Nodes that may hold copies after the decision (live and not draining). */
  readonly nodes: readonly PlacementNode[];
  /**
   * Shard → nodes holding a copy now; length `numShards`. Copies on nodes that are not in `nodes`
   * are gone (forced moves): the strategy re-creates them elsewhere.
   */
  readonly current: readonly (readonly NodeId[])[];
  /**
   * Shards that must not change now (e.g. inside a reassignment cooldown): their copies on nodes in
   * `nodes` stay where they are and they get no new copy.
   */
  readonly held?: ReadonlySet<number>;
}

/** Shard → the nodes that should hold its copies, ascending by node id. */
export type Placement = readonly (readonly NodeId[])[];

/** Why a strategy refused to place: never a silent placement that breaks isolation. */
export type PlacementError =
  | {
      readonly type: 'IsolationImpossible';
      readonly replicationFactor: number;
      readonly groups: readonly string[];
      readonly message: string;
    }
  | { readonly type: 'InvalidPlacementInput'; readonly message: string };

/**
 * A stateless, pure, deterministic whole-map strategy: the same input in any order of nodes or of
 * copies gives the same output.
 */
export interface PlacementStrategy {
  readonly name: string;
  place(input: PlacementInput): Result<Placement, PlacementError>;
  /**
   * The same answer as `place`, computed in steps (a generator that yields between them): the
   * singleton gives its event loop a turn at each, so a large decision never holds it for long.
   * Optional: a strategy without it is asked `place`, in one piece.
   */
  placeInSteps?(input: PlacementInput): Steps<Result<Placement, PlacementError>>;
}
