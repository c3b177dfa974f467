// The simulator of load: a load-aware dataset on the singleton's core (ShardManager) on simulated
// time, with nodes that report what their copies ingest at the rates the caller sets and start
// every copy they are given at once. Rates change as the caller says (skewed, turning hot and
// cooling); the world counts the copies moved and when, and judges balance from the rates and the
// map, not from the code under test. Used by the tests of issue 37 and `npm run bench --
// placement-load`.
import { validateDatasetConfig, type LoadBalanceConfigInput } from '../core/dataset-config.js';
import { datasetRef, incarnation, nodeId, replyTo, type DatasetRef, type Epoch, type NodeId, type ShardNum } from '../core/ids.js';
import type { Effect, LoadReport, Member, NodeOperations, PlacementExplanation, Reply, ShardManagerInput } from '../core/shard-manager/protocol.js';
import { ShardManager } from '../core/shard-manager/shard-manager.js';
import type { ShardManagerState } from '../core/shard-manager/step.js';
import type { ShardMapper } from '../core/shard-mapper.js';
import { ShardEvents } from '../core/status.js';
import type { SeededRandom } from './random.js';

export const LOAD_REPORT_MS = 10_000;

/** Each shard's rate: Zipf(`exponent`) by rank over a random order of the shards (a few hot tenants, a long tail); the rates add up to 1. */
export function zipfRates(shards: number, exponent: number, random: SeededRandom): number[] {
  const order = Array.from({ length: shards }, (_, i) => i);
  for (let i = shards - 1; i > 0; i--) {
    const j = random.int(0, i);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const rates = new Array<number>(shards);
  let total = 0;
  for (let rank = 0; rank < shards; rank++) total += rates[order[rank]!] = 1 / (rank + 1) ** exponent;
  return rates.map((r) => r / total);
}

export interface LoadWorldOptions {
  readonly nodes: number;
  /** Racks, nodes dealt round-robin (default 2). */
  readonly racks?: number;
  readonly shards: number;
  readonly replicationFactor: number;
  readonly loadBalance: LoadBalanceConfigInput;
  /** The dataset's planned moves in flight at once (default the config's, 16): also the most a load round moves. */
  readonly maxConcurrentMoves?: number;
  /** Each shard's records per second. */
  readonly rates: readonly number[];
}

/** A load-aware dataset on the core, its nodes reporting at the rates set, on simulated time. */
export class LoadWorld {
  readonly dataset: DatasetRef = datasetRef('metrics');
  readonly manager = new ShardManager({ settleWindowMs: 0 });
  state: ShardManagerState;
  now = 1_000_000;
  rates: readonly number[];
  /** When each copy was created on a node that did not hold it (from the published changes). */
  readonly copiesAdded: number[] = [];
  private readonly checks: number[] = [];
  /** The node operations as last persisted (what a successor reads from the MetaStore). */
  private persistedOperations: NodeOperations | undefined;
  private asked = 0;
  private joined = 0;

  constructor(readonly options: LoadWorldOptions) {
    this.rates = options.rates;
    this.state = this.manager.initialState();
    this.run({
      type: 'Recover',
      recovery: { epoch: 1 as never, datasets: [], maps: [], subscriptions: [], watchers: [], cooldowns: [], members: [], running: [] },
    });
    for (let i = 0; i < options.nodes; i++) this.join(`n${i}`);
    const config = validateDatasetConfig({
      ref: this.dataset,
      numShards: options.shards,
      minNumNodes: 1,
      replicationFactor: options.replicationFactor,
      strategy: 'balanced',
      ...(options.maxConcurrentMoves === undefined ? {} : { maxConcurrentMoves: options.maxConcurrentMoves }),
      loadBalance: options.loadBalance,
      source: { type: 'synthetic' },
    });
    if (!config.ok) throw new Error(config.error.message);
    this.run({ type: 'SetupDataset', config: config.value, replyTo: this.replyTo() });
    this.startCopies();
  }

  get mapper(): ShardMapper {
    return this.state.datasets.get(this.dataset)!.mapper;
  }

  /** A node joins (racks dealt round-robin in join order). */
  join(name: string): void {
    const rack = `r${this.joined % (this.options.racks ?? 2)}`;
    const member: Member = { node: nodeId(name), incarnation: incarnation(`${name}#1`), joinedAt: ++this.joined, rack };
    this.run({ type: 'MemberUp', member });
    this.startCopies();
  }

  /**
   * The singleton fails over: a new one, at the next epoch, recovers the dataset, its map (every
   * node says it runs what the map gives it) and the persisted node operations, with no load view,
   * as a real successor does.
   */
  failover(): void {
    const { config, mapper } = this.state.datasets.get(this.dataset)!;
    const epoch = (this.state.epoch + 1) as Epoch;
    const running = this.state.members.map((m) => ({
      node: m.node,
      incarnation: m.incarnation,
      shards: [...Array(this.options.shards).keys()].flatMap((shard) => {
        const copy = mapper.copyOnNode(shard, m.node);
        return copy === undefined ? [] : [{ dataset: this.dataset, shard, status: copy.status }];
      }),
    }));
    const recovery = {
      epoch,
      datasets: [config],
      maps: [mapper.toSnapshot(this.state.epoch)],
      subscriptions: [],
      watchers: [],
      cooldowns: [],
      ...(this.persistedOperations === undefined ? {} : { operations: this.persistedOperations }),
      members: this.state.members,
      running,
    };
    this.state = this.manager.initialState();
    this.checks.length = 0;
    this.run({ type: 'Recover', recovery });
    this.startCopies();
  }

  run(input: ShardManagerInput): readonly Effect[] {
    const d = this.manager.decide(this.state, input, this.now);
    this.state = d.state;
    for (const e of d.effects) {
      if (e.type === 'ScheduleCheck') this.checks.push(e.at);
      if (e.type === 'PersistNodeOperations') this.persistedOperations = e.operations;
      if (e.type === 'PublishChanges') for (const ev of e.events) if (ev.type === 'ShardCopyAdded') this.copiesAdded.push(this.now);
    }
    return d.effects;
  }

  /** A request's reply. */
  ask(build: (to: ReturnType<typeof replyTo>) => ShardManagerInput): Reply | undefined {
    const effects = this.run(build(this.replyTo()));
    const reply = effects.find((e) => e.type === 'Reply');
    return reply?.type === 'Reply' ? reply.reply : undefined;
  }

  explain(): PlacementExplanation {
    const reply = this.ask((to) => ({ type: 'ExplainPlacement', dataset: this.dataset, replyTo: to }));
    if (reply?.type !== 'PlacementExplanation') throw new Error(`expected an explanation, got ${JSON.stringify(reply)}`);
    return reply.explanation;
  }

  /** Every copy given to a node and not serving yet starts and catches up at once. */
  startCopies(): void {
    if (!this.state.datasets.has(this.dataset)) return;
    for (let round = 0; round < 20; round++) {
      let reported = false;
      for (let s = 0; s < this.options.shards; s++) {
        for (const a of this.mapper.recordForShard(s).assignments) {
          if (a.status.type === 'Active' || a.placement === 'Leaving') continue;
          const m = this.state.members.find((x) => x.node === a.node);
          if (!m) continue;
          this.run({
            type: 'NodeReport',
            node: m.node,
            incarnation: m.incarnation,
            seq: 1,
            events: [ShardEvents.ingestionStarted(this.dataset, s as ShardNum, a.node)],
          });
          reported = true;
        }
      }
      if (!reported) return;
    }
  }

  /** Every member reports its copies' rates over the last window (and `extra` reports with them). */
  report(extra: readonly LoadReport[] = []): void {
    const reports: LoadReport[] = this.state.members.map((m) => {
      const shards = this.copiesOf(m.node);
      return {
        node: m.node,
        incarnation: m.incarnation,
        dataset: this.dataset,
        at: this.now,
        windowMs: LOAD_REPORT_MS,
        shards,
        records: shards.map((s) => this.rates[s]!),
        bytes: shards.map((s) => this.rates[s]! * 40),
        sinkMs: shards.map((s) => this.rates[s]! / 1000),
      };
    });
    this.run({ type: 'LoadReports', reports: [...reports, ...extra] });
    this.startCopies();
  }

  /** `ms` of simulated time: a report every window, the singleton's timers as they come due. */
  advance(ms: number): void {
    const end = this.now + ms;
    while (this.now < end) {
      const next = Math.min(end, this.now + LOAD_REPORT_MS);
      const due = this.checks.filter((at) => at <= next).sort((a, b) => a - b);
      for (const at of due) {
        this.checks.splice(this.checks.indexOf(at), 1);
        this.now = Math.max(this.now, at);
        this.run({ type: 'CheckCooldowns' });
        this.startCopies();
      }
      this.now = next;
      this.report();
    }
  }

  /** The shards `node` holds a copy of in the map. */
  copiesOf(node: string): number[] {
    return [...Array(this.options.shards).keys()].filter((s) => this.mapper.copyOnNode(s, node as NodeId) !== undefined);
  }

  /** Each member's load from the map and the rates. */
  nodeLoads(): Map<NodeId, number> {
    const loads = new Map<NodeId, number>(this.state.members.map((m) => [m.node, 0]));
    for (let s = 0; s < this.options.shards; s++) for (const n of this.mapper.nodesForShard(s)) if (loads.has(n)) loads.set(n, loads.get(n)! + this.rates[s]!);
    return loads;
  }

  /** The largest |load / mean − 1| over members (equal weights). */
  spread(): number {
    const loads = [...this.nodeLoads().values()];
    const mean = loads.reduce((a, b) => a + b, 0) / loads.length;
    return Math.max(...loads.map((l) => Math.abs(l / mean - 1)));
  }

  /** Copies created within the hour before `at` (moves for load and re-created copies alike). */
  copiesAddedInHourBefore(at: number): number {
    return this.copiesAdded.filter((t) => t > at - 3_600_000 && t <= at).length;
  }

  private replyTo() {
    return replyTo(`load-world-${++this.asked}`);
  }
}
