/**
 * Operations, not events: what an operator does to a cluster arrives at the singleton as several
 * membership events (a rolling restart is a leave and a join per node; a rack lost node by node is
 * one leave per node; a replacement is the old node's leave and the new one's join; adding k nodes
 * is k joins). Each operation runs here through the singleton's own `ShardManager.decide` on a
 * `balanced` dataset, on a simulated clock: events at their times, the timers the singleton asks for
 * (`ScheduleCheck`) fired when due, and every new copy catching up `CATCH_UP_MS` after it was given
 * (its node reports `IngestionStarted`), until nothing is left to happen. Counted: the copies the
 * whole operation created (a node given a copy of a shard it did not hold, decision by decision),
 * against the one-decision minimum: the copies one strategy decision creates from the same start
 * map for the final members.
 */
import { epoch, incarnation, type Member, nodeId, replyTo, ShardEvents, validateDatasetConfig, type ShardMapper, type ShardNum } from '../../src/index.js';
import {
  BalancedPlacementStrategy,
  type ShardManagerInput,
  type ShardManagerState,
  ShardManager,
  type ShardManagerOptions,
  type Effect,
} from '../../src/entries/core.js';

/** How long a new copy takes to catch up (its backlog) before it serves. */
export const CATCH_UP_MS = 5_000;
const START = 1_700_000_000_000;
const TICK_MS = 100;

/** One event of an operation, at `at` ms after the operation starts. */
export type OperationEvent =
  | { readonly at: number; readonly kind: 'down'; readonly node: string }
  | { readonly at: number; readonly kind: 'up'; readonly node: string; readonly rack: string };

export interface ClusterShape {
  readonly label: string;
  readonly shards: number;
  readonly rf: number;
  /** Node → rack. */
  readonly nodes: readonly (readonly [string, string])[];
}

export interface OperationResult {
  /** Copies the whole operation created. */
  readonly created: number;
  /** Copies one strategy decision creates from the start map for the final members. */
  readonly minimum: number;
  /** Decisions that changed the map's copies (a node given or relieved of a copy). */
  readonly rounds: number;
  /** The most shards without a serving copy at any moment (an event's own loss included). */
  readonly maxUnserved: number;
  /** Simulated time from the first event until the map's last change (ms). */
  readonly settledMs: number;
}

/** A settings case: the defaults, or none (every change decided at once, nothing kept). */
export interface Settings {
  readonly label: string;
  readonly replacementDelayMs: number;
  readonly settleWindowMs: number;
}

const DS = 'bench';

/** Runs `events` on a fresh cluster of `shape` with `settings`; see the module's comment. */
export function runOperation(shape: ClusterShape, events: readonly OperationEvent[], settings: Settings): OperationResult {
  const manager = new ShardManager({ settleWindowMs: settings.settleWindowMs } satisfies ShardManagerOptions);
  const config = validateDatasetConfig({
    ref: DS,
    numShards: shape.shards,
    minNumNodes: 1,
    replicationFactor: shape.rf,
    strategy: 'balanced',
    maxConcurrentMoves: shape.shards * shape.rf,
    replacementDelayMs: settings.replacementDelayMs,
    source: { type: 'synthetic' },
  });
  if (!config.ok) throw new Error(config.error.message);
  let now = START;
  let joined = 0;
  const incarnations = new Map<string, number>();
  const member = (node: string, rack: string): Member => {
    incarnations.set(node, (incarnations.get(node) ?? 0) + 1);
    return { node: nodeId(node), incarnation: incarnation(`${node}#${incarnations.get(node)}`), joinedAt: ++joined, rack };
  };
  const timers = new Set<number>();
  /** When each copy not serving yet was given: (shard/node) → ms. */
  const givenAt = new Map<string, number>();
  let state: ShardManagerState = manager.initialState();
  let counting = false;
  let created = 0;
  let rounds = 0;
  let maxUnserved = 0;
  let lastChange = 0;

  const mapper = (): ShardMapper => state.datasets.get(config.value.ref)!.mapper;
  const decide = (input: ShardManagerInput): void => {
    const before = state.datasets.get(config.value.ref)?.mapper;
    const d = manager.decide(state, input, now);
    state = d.state;
    for (const e of d.effects as readonly Effect[]) if (e.type === 'ScheduleCheck') timers.add(e.at);
    const after = state.datasets.get(config.value.ref)?.mapper;
    if (!after) return;
    const { added, changed } = diff(before, after);
    if (counting) {
      if (before?.version !== after.version) lastChange = now;
      created += added;
      if (changed) rounds++;
      maxUnserved = Math.max(maxUnserved, unserved(after));
    }
  };
  /** Copies given and not caught up yet report IngestionStarted once they are `CATCH_UP_MS` old. */
  const catchUp = (): void => {
    const m = mapper();
    const members = new Map(state.members.map((x) => [x.node as string, x]));
    const reports: { node: string; shard: number }[] = [];
    const seen = new Set<string>();
    for (let s = 0; s < m.numShards; s++) {
      for (const a of m.recordForShard(s).assignments) {
        if (!members.has(a.node) || a.status.type === 'Active') continue;
        const key = `${s}/${a.node}`;
        seen.add(key);
        const at = givenAt.get(key) ?? now;
        givenAt.set(key, at);
        if (now - at >= CATCH_UP_MS) reports.push({ node: a.node, shard: s });
      }
    }
    for (const key of [...givenAt.keys()]) if (!seen.has(key)) givenAt.delete(key);
    if (reports.length === 0) return;
    const byNode = new Map<string, number[]>();
    for (const r of reports) byNode.set(r.node, [...(byNode.get(r.node) ?? []), r.shard]);
    decide({
      type: 'NodeReports',
      reports: [...byNode].map(([node, shards]) => ({
        node: nodeId(node),
        incarnation: members.get(node)!.incarnation,
        seq: now,
        events: shards.map((s) => ShardEvents.ingestionStarted(config.value.ref, s as ShardNum, nodeId(node))),
      })),
    });
  };
  const fireTimers = (): void => {
    const due = [...timers].filter((at) => at <= now);
    if (due.length === 0) return;
    for (const at of due) timers.delete(at);
    decide({ type: 'CheckCooldowns' });
  };
  const quiet = (): boolean => timers.size === 0 && givenAt.size === 0 && notActive(mapper(), state) === 0;
  const tick = (): void => {
    now += TICK_MS;
    fireTimers();
    catchUp();
  };

  // The start: every node a member, the dataset placed and caught up.
  const recovery = {
    epoch: epoch(1),
    datasets: [],
    maps: [],
    subscriptions: [],
    watchers: [],
    cooldowns: [],
    members: shape.nodes.map(([n, rack]) => member(n, rack)),
    running: [],
  };
  state = manager.decide(state, { type: 'Recover', recovery }, now).state;
  decide({ type: 'SetupDataset', config: config.value, replyTo: replyTo('bench') });
  for (let i = 0; i < 10_000 && !quiet(); i++) tick();
  const start = mapper();

  counting = true;
  const t0 = now;
  const pending = [...events].sort((a, b) => a.at - b.at);
  for (let guard = 0; guard < 1_000_000; guard++) {
    while (pending.length > 0 && pending[0]!.at <= now - t0) {
      const e = pending.shift()!;
      if (e.kind === 'down') {
        const m = state.members.find((x) => x.node === e.node)!;
        decide({ type: 'MemberDown', node: m.node, incarnation: m.incarnation });
      } else {
        decide({ type: 'MemberUp', member: member(e.node, e.rack) });
      }
    }
    if (pending.length === 0 && quiet()) break;
    tick();
  }
  if (!quiet()) throw new Error(`${shape.label}: the operation never settled`);
  return { created, minimum: oneDecisionMinimum(start, state.members, shape.rf), rounds, maxUnserved, settledMs: Math.max(0, lastChange - t0) };
}

/** Copies in `after` that `before` did not have; whether any copy came or went. */
function diff(before: ShardMapper | undefined, after: ShardMapper): { added: number; changed: boolean } {
  let added = 0;
  let changed = false;
  for (let s = 0; s < after.numShards; s++) {
    const had = new Set(before?.nodesForShard(s) ?? []);
    const has = after.nodesForShard(s);
    for (const node of has) if (!had.has(node)) added++;
    if (has.length !== had.size || added > 0) changed = true;
  }
  return { added, changed };
}

function unserved(m: ShardMapper): number {
  let n = 0;
  for (let s = 0; s < m.numShards; s++) if (m.servingNodes(s).length === 0) n++;
  return n;
}

/** Copies on members that do not serve yet, and copies left on non-members. */
function notActive(m: ShardMapper, state: ShardManagerState): number {
  const members = new Set(state.members.map((x) => x.node as string));
  let n = 0;
  for (let s = 0; s < m.numShards; s++)
    for (const a of m.recordForShard(s).assignments) if (!members.has(a.node) || a.status.type !== 'Active' || a.placement !== 'Available') n++;
  return n;
}

/** The copies one decision of the strategy creates from `start` for `members`. */
export function oneDecisionMinimum(start: ShardMapper, members: readonly Member[], rf: number): number {
  const current = Array.from({ length: start.numShards }, (_, s) => start.nodesForShard(s));
  const nodes = members.map((m) => ({ id: m.node, group: m.rack ?? `node:${m.node}`, weight: m.weight ?? 1 }));
  const target = new BalancedPlacementStrategy().place({ numShards: start.numShards, replicationFactor: rf, nodes, current });
  if (!target.ok) throw new Error(target.error.message);
  let n = 0;
  target.value.forEach((copies, s) => (n += copies.filter((x) => !current[s]!.includes(x)).length));
  return n;
}
