import type { RestartTrouble, ShardherdNode } from '../actors/node-process.js';
import type { AnswerAge } from '../actors/last-answer.js';
import type { BusyActor } from '../actors/runtime.js';
import type { Problem } from '../actors/problems.js';
import type { MapStamp, Member, RecoveryData, RunningShard } from '../core/shard-manager/protocol.js';
import type { ShardMapper } from '../core/shard-mapper.js';

/** A node as JSON: its identity and membership, the shards it runs, and the singleton's state if it hosts it. */
export interface NodeStatus {
  readonly node: string;
  readonly incarnation: string | undefined;
  readonly pid: number;
  readonly state: ShardherdNode['state'];
  /** Present while a new incarnation cannot start yet (the broker or the database is away): it retries. */
  readonly restarting?: RestartTrouble;
  readonly member: boolean;
  /** The copies it runs, the first `RUNNING_LISTED` unless all were asked for: a node of 65 536 copies answered megabytes. */
  readonly running: readonly RunningShard[];
  /** Every copy it runs, counted per dataset and status. */
  readonly runningCounts: Record<string, Record<string, number>>;
  /**
   * How old the answer under `running` and `runningCounts` is (ms; absent before the first), and
   * how long a fresher one has been asked for (0: none is outstanding). /status does not wait more
   * than a few milliseconds on a busy guardian: it shows its last answer.
   */
  readonly runningAnswer: { readonly ageMs?: number; readonly waitingMs: number };
  /** The newest singleton epoch this node has heard of. */
  readonly knownEpoch: number | undefined;
  /** Where the singleton is (from its lease), whether or not this node hosts it. */
  readonly singletonAt: { readonly node: string; readonly incarnation: string; readonly epoch: number; readonly address?: string } | undefined;
  /**
   * `heartbeat` mode only: whether this node holds a lease to write, and the shards holding a batch
   * until it does (a lapse pauses writes, it fails and moves nothing: docs/ARCHITECTURE.md §11.4).
   */
  readonly writeLease?: { readonly held: boolean; readonly waitingShards: number; readonly longestWaitMs: number };
  /** The maps this node follows (its guardian's copies), as stamps, shard counts per status and copy counts per status. */
  readonly maps: readonly {
    readonly dataset: string;
    readonly epoch: number;
    readonly version: number;
    readonly numShards: number;
    readonly statuses: Record<string, number>;
    readonly copies: Record<string, number>;
  }[];
  /** The state of the singleton, on the node that hosts it only. */
  readonly singleton: SingletonStatus | undefined;
  /** Failures no retry fixes (a record too large for the bus, ...), the most recent first; each is logged once. */
  readonly problems: readonly Problem[];
  /**
   * Actors whose handler has run 10 s or more, the longest first (absent when none): what they
   * handle holds their mailbox, so what this node shows from them (`running`) may be as old.
   */
  readonly stalled?: readonly BusyActor[];
}

export interface SingletonStatus {
  readonly epoch: number;
  readonly members: readonly Member[];
  /** Its maps' stamps (the maps themselves are under `maps` and on /api/v1/datasets/:dataset). */
  readonly maps: readonly MapStamp[];
  readonly subscriptions: RecoveryData['subscriptions'];
  readonly watchers: RecoveryData['watchers'];
}

export { RUNNING_LISTED } from '../actors/node-process.js';

/** From local state only (docs/ARCHITECTURE.md §12.4): never waits on the MetaStore or the bus. */
export async function nodeStatus(node: ShardherdNode, opts: { readonly allRunning?: boolean } = {}): Promise<NodeStatus> {
  // Counted where the copies are, and listed in full only when asked: building 65 536 copies'
  // entries to count them held a node's event loop for a quarter of a second per call.
  const summary = opts.allRunning ? node.localRunning().then((all) => ({ listed: all, counts: countRunning(all) })) : node.localRunningSummary();
  const [running, state, cache, lease] = await Promise.all([summary, node.localSingletonState(), node.cache(), node.localLease()]);
  const stalled = node.stalledActors();
  const address = node.view?.members.find((m) => m.node === lease?.node)?.address;
  return {
    node: node.node,
    incarnation: node.incarnation,
    pid: process.pid,
    state: node.state,
    ...(node.restartProblem ? { restarting: node.restartProblem } : {}),
    member: node.isMember,
    running: running.listed,
    runningCounts: running.counts,
    runningAnswer: answerAge(node.localRunningAge(opts.allRunning === true)),
    knownEpoch: cache?.maxEpoch,
    singletonAt: lease ? { node: lease.node, incarnation: lease.incarnation, epoch: lease.epoch, ...(address ? { address } : {}) } : undefined,
    ...(node.writeLease ? { writeLease: node.writeLease } : {}),
    maps: [...(cache?.maps.values() ?? [])].flatMap((f) =>
      f.mapper ? [{ dataset: f.dataset, epoch: f.epoch, version: f.version, numShards: f.mapper.numShards, ...statusCounts(f.mapper) }] : [],
    ),
    singleton:
      state === undefined
        ? undefined
        : {
            epoch: state.epoch,
            members: state.members,
            maps: [...state.datasets.values()].map((d) => ({
              dataset: d.config.ref,
              numShards: d.config.numShards,
              epoch: state.epoch,
              version: d.mapper.version,
            })),
            subscriptions: state.subscriptions.toList(),
            watchers: state.subscriptions.watcherList(),
          },
    problems: node.problems.list(),
    ...(stalled.length > 0 ? { stalled } : {}),
  };
}

function answerAge(age: AnswerAge): NodeStatus['runningAnswer'] {
  return age.ageMs === undefined ? { waitingMs: age.waitingMs } : { ageMs: age.ageMs, waitingMs: age.waitingMs };
}

/**
 * Shards and copies of a map per status, counted once per map and version: counting 65 536 × 3
 * copies at every poll of the status route held the node's event loop for up to 160 ms in a join
 * wave (a followed map changes by a new mapper; the version guards against one changed in place).
 */
interface StatusCounts {
  readonly statuses: Record<string, number>;
  readonly copies: Record<string, number>;
}

const countsOfMap = new WeakMap<ShardMapper, { readonly version: number; readonly counts: StatusCounts }>();

function statusCounts(mapper: ShardMapper): StatusCounts {
  const known = countsOfMap.get(mapper);
  if (known?.version === mapper.version) return known.counts;
  const statuses: Record<string, number> = {};
  const copies: Record<string, number> = {};
  for (let s = 0; s < mapper.numShards; s++) {
    const r = mapper.recordForShard(s);
    statuses[r.status.type] = (statuses[r.status.type] ?? 0) + 1;
    for (let i = 0; i < r.assignments.length; i++) {
      const type = r.assignments[i]!.status.type;
      copies[type] = (copies[type] ?? 0) + 1;
    }
  }
  const counts = { statuses, copies };
  countsOfMap.set(mapper, { version: mapper.version, counts });
  return counts;
}

/** Copies per dataset and status. */
function countRunning(running: readonly RunningShard[]): Record<string, Record<string, number>> {
  const counts: Record<string, Record<string, number>> = {};
  for (const r of running) {
    const perStatus = (counts[r.dataset] ??= {});
    perStatus[r.status.type] = (perStatus[r.status.type] ?? 0) + 1;
  }
  return counts;
}
