// Level-triggered: runs exactly the shards the node's copy of each map gives this node (in a status
// that ingests) and stops the rest — but only while the singleton counts this very incarnation as
// a member under the map's epoch: a restarted node never runs what its previous incarnation was
// given. A lost change heals when the guardian catches up (a gap, or the next digest).
import type { DatasetConfig } from '../core/dataset-config.js';
import type { DatasetRef, Epoch, ShardNum } from '../core/ids.js';
import type { ShardMapper } from '../core/shard-mapper.js';
import { compareTokens, type FencingToken } from '../core/fencing-token.js';
import type { RunningShard, RunningSummary } from '../core/shard-manager/protocol.js';
import { madeForAdmission, type Admission, type MembersRecord } from '../protocol/followed-maps.js';
import { isIngestionStatus, ShardEvents, type ShardStatus, Status } from '../core/status.js';
import { ShardCopy, type CopyHost } from './shard-copy.js';
import { CopyTimers } from './copy-timers.js';
import { LotLog, type Lot } from './lot-log.js';
import type { NodeEnv } from './node-env.js';
import type { ReportSink } from './reporter.js';
import type { ActorRef } from './runtime.js';

export type CoordinatorMsg =
  /** The node's copy of a dataset's map changed (the mapper is never changed afterwards). */
  | {
      readonly type: 'MapState';
      readonly dataset: DatasetRef;
      readonly epoch: Epoch;
      readonly mapper: ShardMapper;
      readonly config: DatasetConfig;
      readonly shards?: ReadonlySet<number>;
      readonly madeFor?: number;
    }
  /** `admission`: since when the singleton counts this incarnation (absent: it does not). */
  | { readonly type: 'Members'; readonly members: MembersRecord; readonly admission?: Admission }
  | { readonly type: 'DatasetGone'; readonly dataset: DatasetRef }
  | { readonly type: 'StopAll'; readonly reason: string }
  | { readonly type: 'GetRunning'; readonly reply: (running: RunningShard[]) => void }
  /** Counts of every copy and the first `listUpTo` as `GetRunning` gives them: /status of a node of 65 536 copies built them all. */
  | { readonly type: 'GetRunningSummary'; readonly listUpTo: number; readonly reply: (summary: RunningSummary) => void }
  /** The rest of a reconciliation too large for one turn of the event loop (`RECONCILE_SLICE`). */
  | {
      readonly type: 'ReconcileRest';
      readonly dataset: DatasetRef;
      readonly wanted: readonly number[];
      readonly from: number;
      readonly started: Lot;
      readonly stopsBefore: number;
    };

/**
 * Copies to run that one reconciliation looks at in one message: a map that gives a node 65 536
 * copies starts them over 64 turns of the event loop instead of one of about a second. Each slice
 * looks at its own shards against the map current then (a newer map may have come in between);
 * it used to filter the whole rest again, which made a large map's start quadratic.
 */
export const RECONCILE_SLICE = 1024;

interface Running {
  /** The copy (its dataset and shard with it). */
  readonly copy: ShardCopy;
  /**
   * The newest fencing token of its copy in a map this node acted on while the copy was running:
   * once it failed, only a newer token is a new assignment (a map that still carries the token it
   * failed under, or an older one, is the singleton not having heard of the failure yet).
   */
  assignment: FencingToken;
  /**
   * The token under which the singleton last heard this copy's status: its start's, then each
   * newer one it was restated under. A copy's status is said once per assignment, never again
   * because a map or members message came: restating on every message while the singleton lagged
   * made a storm (millions of reports for 49 152 copies, issue 34) that made it lag more.
   */
  statedUnder: FencingToken;
  status: ShardStatus;
}

interface State {
  readonly maps: Map<DatasetRef, { readonly epoch: Epoch; readonly mapper: ShardMapper; readonly config: DatasetConfig; readonly madeFor: number | undefined }>;
  members: MembersRecord | undefined;
  admission: Admission | undefined;
  /** `dataset/shard` → the copy running it. */
  readonly running: Map<string, Running>;
  /** StopAll messages handled: the rest of a sliced reconciliation from before one is dropped. */
  stopAlls: number;
}

export function spawnNodeCoordinator(env: NodeEnv, parent: ActorRef<unknown>, reporter: ReportSink): ActorRef<CoordinatorMsg> {
  const lots = new LotLog(env.log, env.clock);
  /** " (in 3 changes of the map)" when a line sums several. */
  const inChanges = (changes: number) => (changes > 1 ? ` (in ${changes} changes of the map within 10 s)` : '');

  /** Stops these copies; one log line for them all (a fence of 16 384 copies logged 16 384). */
  const stopShards = (s: State, keys: readonly string[], why: string) => {
    const stopped: Running[] = [];
    for (const key of keys) {
      const r = s.running.get(key);
      if (!r) continue;
      s.running.delete(key);
      r.copy.stop();
      stopped.push(r);
    }
    if (stopped.length === 0) return;
    lots.say(`shards.stopped ${why}`, { count: stopped.length, sample: sampleOf(stopped) }, (lot, changes) =>
      env.log.info(
        { event: 'shards.stopped', copies: lot.count, sample: lot.sample, why, ...(changes > 1 ? { changes } : {}) },
        `${copies(lot.count)} stopped: ${why}${inChanges(changes)}`,
      ),
    );
  };

  /**
   * Whether the singleton counts this incarnation as a member under the epoch the map is of, and
   * the map was made for those members (not an older map that may still give this node its
   * previous incarnation's copies; see `madeForAdmission`).
   */
  const acting = (s: State, map: { readonly epoch: Epoch; readonly madeFor: number | undefined }): boolean =>
    s.members !== undefined &&
    s.members.epoch === map.epoch &&
    s.members.members.some((m) => m.node === env.node && m.incarnation === env.incarnation) &&
    madeForAdmission(map.epoch, map.madeFor, s.admission);

  /** Whether the map gives this node a copy of `shard` in a status that ingests. */
  const isMine = (map: { readonly mapper: ShardMapper }, shard: number): boolean => {
    const copy = map.mapper.copyOnNode(shard, env.node);
    return copy !== undefined && isIngestionStatus(copy.status);
  };

  /**
   * Runs exactly the copies this node holds in the map (Leaving ones too: they ingest until
   * removed) and stops the others: of the `only` shards a change touched, or of the whole map.
   * The stops happen at once; the copies to run are looked at a slice at a time (`runSlice`).
   */
  const reconcile = (s: State, dataset: DatasetRef, self: ActorRef<CoordinatorMsg>, only?: ReadonlySet<number>) => {
    const map = s.maps.get(dataset);
    if (!map || !acting(s, map)) return;
    let wanted: number[];
    if (only) {
      wanted = [];
      const gone: string[] = [];
      for (const shard of only) {
        if (isMine(map, shard)) wanted.push(shard);
        else gone.push(`${dataset}/${shard}`);
      }
      stopShards(s, gone, 'the map no longer gives them to this node');
    } else {
      wanted = map.mapper
        .copiesForNode(env.node)
        .filter((c) => isIngestionStatus(c.copy.status))
        .map((c) => c.shard);
      const keep = new Set(wanted);
      stopShards(
        s,
        [...s.running].filter(([, r]) => r.copy.dataset === dataset && !keep.has(r.copy.shard)).map(([key]) => key),
        'the map no longer gives them to this node',
      );
    }
    runSlice(s, dataset, self, wanted, 0, { count: 0, sample: [] });
  };

  /**
   * Starts (or restates) the wanted copies `from` on, `RECONCILE_SLICE` of them, and sends itself
   * the rest. Each slice looks at its own shards only, against the map current then (a newer map
   * may have come in between): a shard no longer this node's is stopped, or not started.
   */
  const runSlice = (s: State, dataset: DatasetRef, self: ActorRef<CoordinatorMsg>, wanted: readonly number[], from: number, startedBefore: Lot) => {
    const map = s.maps.get(dataset);
    if (!map || !acting(s, map)) return;
    const to = Math.min(wanted.length, from + RECONCILE_SLICE);
    const restated: Running[] = [];
    const started: Running[] = [];
    const gone: string[] = [];
    for (let i = from; i < to; i++) {
      const shard = wanted[i]!;
      const key = `${dataset}/${shard}`;
      if (!isMine(map, shard)) {
        gone.push(key);
        continue;
      }
      const running = s.running.get(key);
      // Defined: the copy is wanted and the node acts on this map.
      const assignment = tokenOf(s, dataset, shard)!;
      if (running && running.status.type === 'Error' && compareTokens(assignment, running.assignment) > 0) {
        // It failed here, the singleton took the copy away and has given it back since (an
        // incremental map may carry both changes at once): a new start, not the failed one kept.
        stopShards(s, [key], 'it failed here and the map gives it to this node again: it starts over');
      } else if (running) {
        // A failed copy waits for a newer token; a running one follows the map's (§12).
        if (running.status.type !== 'Error') running.assignment = assignment;
        if (compareTokens(assignment, running.statedUnder) !== 0) {
          running.statedUnder = assignment;
          if (restateIfRestarted(running, map.mapper.copyOnNode(shard, env.node)!.status)) restated.push(running);
        }
        continue;
      }
      const r: Running = { copy: new ShardCopy(host, map.config, shard as ShardNum), assignment, statedUnder: assignment, status: Status.assigned };
      s.running.set(key, r);
      started.push(r);
    }
    stopShards(s, gone, 'the map no longer gives them to this node');
    const lot: Lot = { count: startedBefore.count + started.length, sample: [...startedBefore.sample, ...sampleOf(started)].slice(0, 5) };
    if (to < wanted.length) env.runtime.send(self, { type: 'ReconcileRest', dataset, wanted, from: to, started: lot, stopsBefore: s.stopAlls });
    else if (lot.count > 0) {
      lots.say(`shards.started ${dataset}`, lot, (all, changes) =>
        env.log.info(
          { event: 'shards.started', dataset, copies: all.count, sample: all.sample, ...(changes > 1 ? { changes } : {}) },
          `${copies(all.count)} of ${dataset} started${inChanges(changes)}`,
        ),
      );
    }
    if (restated.length > 0) {
      // One line for the lot: a new singleton's map restates every copy of a large node at once.
      lots.say(`shards.restated ${dataset}`, { count: restated.length, sample: sampleOf(restated) }, (all, changes) =>
        env.log.info(
          { event: 'shards.restated', dataset, copies: all.count, sample: all.sample, ...(changes > 1 ? { changes } : {}) },
          `start of ${copies(all.count)} already running under a new assignment: they keep ingesting and report their status again${inChanges(changes)}`,
        ),
      );
    }
  };

  /**
   * The fencing token of this node's copy of a shard in the map it acts on now (the map's epoch and
   * the shard's assignment version; docs/ARCHITECTURE.md §12), read at each write so a copy the map
   * keeps moves on to the newer token; undefined once the map no longer gives the copy to this node.
   */
  const tokenOf = (s: State, dataset: DatasetRef, shard: number): FencingToken | undefined => {
    const map = s.maps.get(dataset);
    const copy = map?.mapper.copyOnNode(shard, env.node);
    if (!map || !copy || !isIngestionStatus(copy.status) || !acting(s, map)) return undefined;
    return { epoch: map.epoch, version: map.mapper.assignmentVersion(shard) };
  };

  /** What `GetRunning` says of a copy: its status, and the token its writes carry now. */
  const runningShard = (s: State, r: Running): RunningShard => {
    const { dataset, shard } = r.copy;
    const writingUnder = tokenOf(s, dataset, shard);
    return { dataset, shard, status: r.status, ...(writingUnder ? { writingUnder } : {}) };
  };

  /**
   * A start sent again for a copy this node already runs (the map says Assigned: a recovering
   * singleton that did not hear of it, say) is no restart: ingestion goes on from where it is, and
   * the copy says again what it is. Restarting it would report Recovery for its catch-up time, and
   * a Leaving copy that stops serving while its successor still catches up leaves the shard with
   * no Active copy during a planned handoff.
   */
  const restateIfRestarted = (r: Running, inMap: ShardStatus): boolean => {
    if (inMap.type !== 'Assigned') return false;
    const event =
      r.status.type === 'Active'
        ? ShardEvents.ingestionStarted(r.copy.dataset, r.copy.shard, env.node)
        : r.status.type === 'Recovery'
          ? ShardEvents.recoveryInProgress(r.copy.dataset, r.copy.shard, env.node, r.status.progressPct)
          : undefined; // still starting: its first report is on its way
    if (!event) return false;
    reporter.report(event);
    return true;
  };

  // One state object, mutated in place by every message and by the copies' calls.
  const initialState: State = { maps: new Map(), members: undefined, admission: undefined, running: new Map(), stopAlls: 0 };

  /** What every copy of this node shares. */
  const host: CopyHost = {
    env,
    reporter,
    timers: new CopyTimers(env.clock),
    /**
     * A copy's new status, applied at once rather than as a message: the coordinator handles one
     * message per turn of the event loop, and a node that starts 65 536 copies hears from each at
     * once; as messages they held its maps and members behind them for minutes (issue 34). Only the
     * copy's current run counts: a stopped run's last call may end after a new run of the same copy
     * started, and its failure is not the new run's.
     */
    statusChanged(copy, status) {
      const s = initialState;
      const r = s.running.get(`${copy.dataset}/${copy.shard}`);
      if (!r || r.copy !== copy) return;
      r.status = status;
      // The copy wrote under the token its map gave it at each write: that is what it failed under.
      const now = tokenOf(s, copy.dataset, copy.shard);
      if (status.type === 'Error' && now !== undefined && compareTokens(now, r.assignment) > 0) r.assignment = now;
    },
    tokenOf: (copy) => tokenOf(initialState, copy.dataset, copy.shard),
  };
  return env.runtime.spawn<State, CoordinatorMsg>(
    parent,
    'coordinator',
    (s, msg, ctx) => {
      switch (msg.type) {
        case 'MapState': {
          const before = s.maps.get(msg.dataset);
          s.maps.set(msg.dataset, { epoch: msg.epoch, mapper: msg.mapper, config: msg.config, madeFor: msg.madeFor });
          // Only the shards a change touched, unless the map came whole or under a new epoch (the
          // node may have started acting with it).
          const incremental = msg.shards !== undefined && before !== undefined && before.epoch === msg.epoch;
          reconcile(s, msg.dataset, ctx.self, incremental ? msg.shards : undefined);
          return s;
        }
        case 'Members':
          s.members = msg.members;
          s.admission = msg.admission;
          // With the failure detector the singleton may evict this incarnation while the group still
          // lists it (docs/ARCHITECTURE.md §11.5): once the singleton no longer counts it, it runs
          // nothing (its lease has run out anyway); it starts again when the singleton counts it.
          if (env.detector && !msg.members.members.some((m) => m.node === env.node && m.incarnation === env.incarnation)) {
            stopShards(s, [...s.running.keys()], 'the singleton no longer counts this incarnation as a member');
            return s;
          }
          for (const dataset of s.maps.keys()) reconcile(s, dataset, ctx.self);
          return s;
        case 'DatasetGone':
          s.maps.delete(msg.dataset);
          stopShards(
            s,
            [...s.running].filter(([, r]) => r.copy.dataset === msg.dataset).map(([key]) => key),
            'the dataset was removed',
          );
          return s;
        case 'StopAll':
          s.stopAlls++;
          stopShards(s, [...s.running.keys()], msg.reason);
          return s;
        case 'ReconcileRest':
          // A StopAll since (a fence): what was left to start is not started.
          if (msg.stopsBefore === s.stopAlls) runSlice(s, msg.dataset, ctx.self, msg.wanted, msg.from, msg.started);
          return s;
        case 'GetRunning':
          msg.reply([...s.running.values()].filter((r) => r.status.type !== 'Error').map((r) => runningShard(s, r)));
          return s;
        case 'GetRunningSummary': {
          const listed: RunningShard[] = [];
          const counts: Record<string, Record<string, number>> = {};
          for (const r of s.running.values()) {
            if (r.status.type === 'Error') continue;
            const perStatus = (counts[r.copy.dataset] ??= {});
            perStatus[r.status.type] = (perStatus[r.status.type] ?? 0) + 1;
            if (listed.length < msg.listUpTo) listed.push(runningShard(s, r));
          }
          msg.reply({ listed, counts });
          return s;
        }
      }
    },
    {
      initialState,
      onCrash: 'resume',
      // The node stops (or crashes): its copies stop with it.
      afterStop: (s) => {
        for (const r of s.running.values()) r.copy.stop(true);
        s.running.clear();
        host.timers.close();
      },
    },
  );
}

/** "1 shard copy", "3 shard copies". */
const copies = (n: number) => `${n} shard cop${n === 1 ? 'y' : 'ies'}`;

/** The first few copies of a log line's lot, as `dataset/shard`. */
const sampleOf = (rs: readonly Running[]) => rs.slice(0, 5).map((r) => `${r.copy.dataset}/${r.copy.shard}`);
