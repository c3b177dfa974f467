// The node coordinator's logic as a pure step. Level-triggered: runs exactly the shards the node's
// copy of each map gives this node (in a status that ingests) and stops the rest — but only while
// the singleton counts this very incarnation as a member under the map's epoch: a restarted node
// never runs what its previous incarnation was given.
//
// The table of running copies (65 536 on a large node) is not copied at each step: the shell owns
// it, hands it to each step read-only with the message, and writes it only as the step's effects
// say (`Start`, `Update`, `Stop`), in their order. A copy's status comes as a call, not a message
// (see `CopyStatus`), and is stepped at once.
import type { DatasetConfig } from '../../core/dataset-config.js';
import type { DatasetRef, Epoch, Incarnation, NodeId, ShardNum } from '../../core/ids.js';
import type { ShardMapper } from '../../core/shard-mapper.js';
import { compareTokens, type FencingToken } from '../../core/fencing-token.js';
import type { RunningShard, RunningSummary } from '../../core/shard-manager/protocol.js';
import { madeForAdmission, type Admission, type MembersRecord } from '../../protocol/followed-maps.js';
import { isIngestionStatus, ShardEvents, type ShardEvent, type ShardStatus, Status } from '../../core/status.js';
import type { Reducer, Stepped } from '../reducer.js';
import type { Lot } from '../lot-log.js';
import { RECONCILE_SLICE, type CoordinatorMsg } from './messages.js';

export interface MapOf {
  readonly epoch: Epoch;
  readonly mapper: ShardMapper;
  readonly config: DatasetConfig;
  readonly madeFor: number | undefined;
}

export interface CoordinatorState {
  readonly node: NodeId;
  readonly incarnation: Incarnation;
  /** Whether the node runs a failure detector (the singleton may evict it while the group lists it). */
  readonly detector: boolean;
  readonly maps: ReadonlyMap<DatasetRef, MapOf>;
  readonly members: MembersRecord | undefined;
  readonly admission: Admission | undefined;
  /** StopAll messages handled: the rest of a sliced reconciliation from before one is dropped. */
  readonly stopAlls: number;
}

/** A running copy, as the step sees it (the shell holds the copy itself). */
export interface RunningRec {
  readonly dataset: DatasetRef;
  readonly shard: ShardNum;
  /**
   * The newest fencing token of its copy in a map this node acted on while the copy was running:
   * once it failed, only a newer token is a new assignment (a map that still carries the token it
   * failed under, or an older one, is the singleton not having heard of the failure yet).
   */
  readonly assignment: FencingToken;
  /**
   * The token under which the singleton last heard this copy's status: its start's, then each
   * newer one it was restated under. A copy's status is said once per assignment, never again
   * because a map or members message came: restating on every message while the singleton lagged
   * made a storm (millions of reports for 49 152 copies, issue 34) that made it lag more.
   */
  readonly statedUnder: FencingToken;
  readonly status: ShardStatus;
}

/**
 * A copy's new status, applied at once rather than as a message: the coordinator handles one
 * message per turn of the event loop, and a node that starts 65 536 copies hears from each at
 * once; as messages they held its maps and members behind them for minutes (issue 34). The shell
 * steps it only for the copy's current run: a stopped run's last call may end after a new run of
 * the same copy started, and its failure is not the new run's.
 */
export interface CopyStatus {
  readonly type: 'CopyStatus';
  readonly key: string;
  readonly status: ShardStatus;
}

export interface CoordinatorInput {
  readonly msg: CoordinatorMsg | CopyStatus;
  /** `dataset/shard` → the copy running it, as the shell holds it when the message is stepped. */
  readonly running: ReadonlyMap<string, RunningRec>;
}

/** A log line summing a lot of copies (said through the shell's `LotLog`). */
export type SayLine =
  | { readonly what: 'stopped'; readonly why: string }
  | { readonly what: 'started'; readonly dataset: DatasetRef }
  | { readonly what: 'restated'; readonly dataset: DatasetRef };

export type CoordinatorEffect =
  /** Runs a new copy of `shard` and adds `rec` to the table. */
  | { readonly type: 'Start'; readonly key: string; readonly config: DatasetConfig; readonly shard: ShardNum; readonly rec: RunningRec }
  /** Changes these fields of a running copy's entry. */
  | { readonly type: 'Update'; readonly key: string; readonly set: Partial<Pick<RunningRec, 'assignment' | 'statedUnder' | 'status'>> }
  /** Removes these copies from the table and stops them, in this order. */
  | { readonly type: 'Stop'; readonly keys: readonly string[] }
  | { readonly type: 'Say'; readonly line: SayLine; readonly lot: Lot }
  /** Reports a copy's status to the singleton (through the node's reporter). */
  | { readonly type: 'Report'; readonly event: ShardEvent }
  /** Sends the coordinator itself a message. */
  | { readonly type: 'Send'; readonly msg: CoordinatorMsg }
  /** The answer to `GetRunning`, given to its callback. */
  | { readonly type: 'Reply'; readonly running: RunningShard[] }
  /** The answer to `GetRunningSummary`, given to its callback. */
  | { readonly type: 'ReplySummary'; readonly summary: RunningSummary };

export const initialCoordinatorState = (node: NodeId, incarnation: Incarnation, detector: boolean): CoordinatorState => ({
  node,
  incarnation,
  detector,
  maps: new Map(),
  members: undefined,
  admission: undefined,
  stopAlls: 0,
});

const NOT_MINE = 'the map no longer gives them to this node';

export const stepCoordinator: Reducer<CoordinatorState, CoordinatorInput, CoordinatorEffect> = (state, { msg, running }) => {
  const effects: CoordinatorEffect[] = [];
  const done = (next: CoordinatorState): Stepped<CoordinatorState, CoordinatorEffect> => ({ state: next, effects });
  switch (msg.type) {
    case 'MapState': {
      const before = state.maps.get(msg.dataset);
      const maps = new Map(state.maps).set(msg.dataset, { epoch: msg.epoch, mapper: msg.mapper, config: msg.config, madeFor: msg.madeFor });
      const next = { ...state, maps };
      // Only the shards a change touched, unless the map came whole or under a new epoch (the
      // node may have started acting with it).
      const incremental = msg.shards !== undefined && before !== undefined && before.epoch === msg.epoch;
      reconcile(next, running, msg.dataset, effects, incremental ? msg.shards : undefined);
      return done(next);
    }
    case 'Members': {
      const next = { ...state, members: msg.members, admission: msg.admission };
      // With the failure detector the singleton may evict this incarnation while the group still
      // lists it (docs/ARCHITECTURE.md §11.5): once the singleton no longer counts it, it runs
      // nothing (its lease has run out anyway); it starts again when the singleton counts it.
      if (state.detector && !msg.members.members.some((m) => m.node === state.node && m.incarnation === state.incarnation)) {
        stopShards(running, [...running.keys()], 'the singleton no longer counts this incarnation as a member', effects);
        return done(next);
      }
      // Each dataset's reconciliation reads and writes its own copies only: the table as handed in
      // is what each of them sees of its dataset.
      for (const dataset of next.maps.keys()) reconcile(next, running, dataset, effects);
      return done(next);
    }
    case 'DatasetGone': {
      const maps = new Map(state.maps);
      maps.delete(msg.dataset);
      const gone = [...running].filter(([, r]) => r.dataset === msg.dataset).map(([key]) => key);
      stopShards(running, gone, 'the dataset was removed', effects);
      return done({ ...state, maps });
    }
    case 'StopAll':
      stopShards(running, [...running.keys()], msg.reason, effects);
      return done({ ...state, stopAlls: state.stopAlls + 1 });
    case 'ReconcileRest':
      // A StopAll since (a fence): what was left to start is not started.
      if (msg.stopsBefore === state.stopAlls) runSlice(state, running, msg.dataset, msg.wanted, msg.from, msg.started, effects);
      return done(state);
    case 'GetRunning':
      effects.push({ type: 'Reply', running: [...running.values()].filter((r) => r.status.type !== 'Error').map((r) => runningShard(state, r)) });
      return done(state);
    case 'GetRunningSummary':
      effects.push({ type: 'ReplySummary', summary: summaryOf(state, running, msg.listUpTo) });
      return done(state);
    case 'CopyStatus':
      copyStatus(state, running, msg, effects);
      return done(state);
  }
};

/** Stops these copies; one log line for them all (a fence of 16 384 copies logged 16 384). */
function stopShards(running: ReadonlyMap<string, RunningRec>, keys: readonly string[], why: string, effects: CoordinatorEffect[]): void {
  const stopped = keys.filter((key) => running.has(key));
  if (stopped.length === 0) return;
  effects.push({ type: 'Stop', keys: stopped }, { type: 'Say', line: { what: 'stopped', why }, lot: { count: stopped.length, sample: stopped.slice(0, 5) } });
}

/**
 * Whether the singleton counts this incarnation as a member under the epoch the map is of, and
 * the map was made for those members (not an older map that may still give this node its
 * previous incarnation's copies; see `madeForAdmission`).
 */
const acting = (s: CoordinatorState, map: { readonly epoch: Epoch; readonly madeFor: number | undefined }): boolean =>
  s.members !== undefined &&
  s.members.epoch === map.epoch &&
  s.members.members.some((m) => m.node === s.node && m.incarnation === s.incarnation) &&
  madeForAdmission(map.epoch, map.madeFor, s.admission);

/** Whether the map gives this node a copy of `shard` in a status that ingests. */
const isMine = (s: CoordinatorState, map: { readonly mapper: ShardMapper }, shard: number): boolean => {
  const copy = map.mapper.copyOnNode(shard, s.node);
  return copy !== undefined && isIngestionStatus(copy.status);
};

/**
 * Runs exactly the copies this node holds in the map (Leaving ones too: they ingest until
 * removed) and stops the others: of the `only` shards a change touched, or of the whole map.
 * The stops happen at once; the copies to run are looked at a slice at a time (`runSlice`). The
 * copies stopped and the ones looked at are different ones, so both read the table as handed in.
 */
function reconcile(
  s: CoordinatorState,
  running: ReadonlyMap<string, RunningRec>,
  dataset: DatasetRef,
  effects: CoordinatorEffect[],
  only?: ReadonlySet<number>,
): void {
  const map = s.maps.get(dataset);
  if (!map || !acting(s, map)) return;
  let wanted: number[];
  if (only) {
    wanted = [];
    const gone: string[] = [];
    for (const shard of only) {
      if (isMine(s, map, shard)) wanted.push(shard);
      else gone.push(`${dataset}/${shard}`);
    }
    stopShards(running, gone, NOT_MINE, effects);
  } else {
    wanted = map.mapper
      .copiesForNode(s.node)
      .filter((c) => isIngestionStatus(c.copy.status))
      .map((c) => c.shard);
    const keep = new Set(wanted);
    const gone = [...running].filter(([, r]) => r.dataset === dataset && !keep.has(r.shard)).map(([key]) => key);
    stopShards(running, gone, NOT_MINE, effects);
  }
  runSlice(s, running, dataset, wanted, 0, { count: 0, sample: [] }, effects);
}

/**
 * Starts (or restates) the wanted copies `from` on, `RECONCILE_SLICE` of them, and sends itself
 * the rest. Each slice looks at its own shards only, against the map current then (a newer map
 * may have come in between): a shard no longer this node's is stopped, or not started.
 */
function runSlice(
  s: CoordinatorState,
  running: ReadonlyMap<string, RunningRec>,
  dataset: DatasetRef,
  wanted: readonly number[],
  from: number,
  startedBefore: Lot,
  effects: CoordinatorEffect[],
): void {
  const map = s.maps.get(dataset);
  if (!map || !acting(s, map)) return;
  const to = Math.min(wanted.length, from + RECONCILE_SLICE);
  const restated: string[] = [];
  const started: string[] = [];
  const gone: string[] = [];
  for (let i = from; i < to; i++) {
    const shard = wanted[i]! as ShardNum;
    const key = `${dataset}/${shard}`;
    if (!isMine(s, map, shard)) {
      gone.push(key);
      continue;
    }
    const r = running.get(key);
    // Defined: the copy is wanted and the node acts on this map.
    const assignment = tokenOf(s, dataset, shard)!;
    if (r && r.status.type === 'Error' && compareTokens(assignment, r.assignment) > 0) {
      // It failed here, the singleton took the copy away and has given it back since (an
      // incremental map may carry both changes at once): a new start, not the failed one kept.
      stopShards(running, [key], 'it failed here and the map gives it to this node again: it starts over', effects);
    } else if (r) {
      if (follow(r, assignment, map.mapper.copyOnNode(shard, s.node)!.status, s.node, key, effects)) restated.push(key);
      continue;
    }
    effects.push({ type: 'Start', key, config: map.config, shard, rec: { dataset, shard, assignment, statedUnder: assignment, status: Status.assigned } });
    started.push(key);
  }
  stopShards(running, gone, NOT_MINE, effects);
  const lot: Lot = { count: startedBefore.count + started.length, sample: [...startedBefore.sample, ...started.slice(0, 5)].slice(0, 5) };
  if (to < wanted.length) effects.push({ type: 'Send', msg: { type: 'ReconcileRest', dataset, wanted, from: to, started: lot, stopsBefore: s.stopAlls } });
  else if (lot.count > 0) effects.push({ type: 'Say', line: { what: 'started', dataset }, lot });
  // One line for the lot: a new singleton's map restates every copy of a large node at once.
  if (restated.length > 0) effects.push({ type: 'Say', line: { what: 'restated', dataset }, lot: { count: restated.length, sample: restated.slice(0, 5) } });
}

/**
 * A copy this node already runs and the map still gives it: a failed copy waits for a newer
 * token; a running one follows the map's (§12). Whether it was restated.
 */
function follow(r: RunningRec, assignment: FencingToken, inMap: ShardStatus, node: NodeId, key: string, effects: CoordinatorEffect[]): boolean {
  const set: { assignment?: FencingToken; statedUnder?: FencingToken } = {};
  if (r.status.type !== 'Error' && compareTokens(assignment, r.assignment) !== 0) set.assignment = assignment;
  if (compareTokens(assignment, r.statedUnder) === 0) {
    if (set.assignment) effects.push({ type: 'Update', key, set });
    return false;
  }
  set.statedUnder = assignment;
  effects.push({ type: 'Update', key, set });
  const event = restatement(r, inMap, node);
  if (event) effects.push({ type: 'Report', event });
  return event !== undefined;
}

/**
 * A start sent again for a copy this node already runs (the map says Assigned: a recovering
 * singleton that did not hear of it, say) is no restart: ingestion goes on from where it is, and
 * the copy says again what it is. Restarting it would report Recovery for its catch-up time, and
 * a Leaving copy that stops serving while its successor still catches up leaves the shard with
 * no Active copy during a planned handoff.
 */
function restatement(r: RunningRec, inMap: ShardStatus, node: NodeId): ShardEvent | undefined {
  if (inMap.type !== 'Assigned') return undefined;
  return r.status.type === 'Active'
    ? ShardEvents.ingestionStarted(r.dataset, r.shard, node)
    : r.status.type === 'Recovery'
      ? ShardEvents.recoveryInProgress(r.dataset, r.shard, node, r.status.progressPct)
      : undefined; // still starting: its first report is on its way
}

/**
 * The fencing token of this node's copy of a shard in the map it acts on now (the map's epoch and
 * the shard's assignment version; docs/ARCHITECTURE.md §12), read at each write so a copy the map
 * keeps moves on to the newer token; undefined once the map no longer gives the copy to this node.
 */
export function tokenOf(s: CoordinatorState, dataset: DatasetRef, shard: number): FencingToken | undefined {
  const map = s.maps.get(dataset);
  const copy = map?.mapper.copyOnNode(shard, s.node);
  if (!map || !copy || !isIngestionStatus(copy.status) || !acting(s, map)) return undefined;
  return { epoch: map.epoch, version: map.mapper.assignmentVersion(shard) };
}

/** What `GetRunning` says of a copy: its status, and the token its writes carry now. */
function runningShard(s: CoordinatorState, r: RunningRec): RunningShard {
  const writingUnder = tokenOf(s, r.dataset, r.shard);
  return { dataset: r.dataset, shard: r.shard, status: r.status, ...(writingUnder ? { writingUnder } : {}) };
}

function summaryOf(s: CoordinatorState, running: ReadonlyMap<string, RunningRec>, listUpTo: number): RunningSummary {
  const listed: RunningShard[] = [];
  const counts: Record<string, Record<string, number>> = {};
  for (const r of running.values()) {
    if (r.status.type === 'Error') continue;
    const perStatus = (counts[r.dataset] ??= {});
    perStatus[r.status.type] = (perStatus[r.status.type] ?? 0) + 1;
    if (listed.length < listUpTo) listed.push(runningShard(s, r));
  }
  return { listed, counts };
}

function copyStatus(s: CoordinatorState, running: ReadonlyMap<string, RunningRec>, msg: CopyStatus, effects: CoordinatorEffect[]): void {
  const r = running.get(msg.key);
  if (!r) return;
  // The copy wrote under the token its map gave it at each write: that is what it failed under.
  const now = msg.status.type === 'Error' ? tokenOf(s, r.dataset, r.shard) : undefined;
  const failedUnder = now !== undefined && compareTokens(now, r.assignment) > 0 ? now : undefined;
  effects.push({ type: 'Update', key: msg.key, set: failedUnder ? { status: msg.status, assignment: failedUnder } : { status: msg.status } });
}
