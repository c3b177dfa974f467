// What the demo knows about the shard maps: one ShardEventSubscriber per dataset (as a query
// router would run), every map it applies checked for a shard with two owners, and every change of
// a shard's owner or status recorded. If the node hosting the subscribers dies, they are opened
// again from another node.
import type { DatasetRef, NodeId } from '../../core/ids.js';
import type { ShardMapper } from '../../core/shard-mapper.js';
import type { ShardStatusType } from '../../core/status.js';
import type { ShardherdNode } from '../../actors/node-process.js';
import { ShardEventSubscriber } from '../../client/shard-event-subscriber.js';
import type { EmbeddedCluster } from '../../embedded/embedded-cluster.js';

/** One change of a shard, as a subscriber saw it. */
export interface ShardChange {
  readonly at: number;
  readonly dataset: DatasetRef;
  readonly shard: number;
  readonly owner: NodeId | undefined;
  readonly status: ShardStatusType;
  readonly epoch: number;
  readonly version: number;
}

/** A moment at which two live nodes both said they ran one shard. */
export interface RunningOverlap {
  readonly at: number;
  readonly dataset: string;
  readonly shard: number;
  readonly nodes: readonly NodeId[];
}

/** A map in which some shard had more than one assignment. */
export interface DoubleOwnership {
  readonly dataset: DatasetRef;
  readonly shard: number;
  readonly owners: readonly NodeId[];
  readonly epoch: number;
  readonly version: number;
}

export class ShardWatch {
  private subscribers = new Map<DatasetRef, ShardEventSubscriber>();
  private readonly last = new Map<string, { owner: NodeId | undefined; status: ShardStatusType }>();
  private hostNode: ShardherdNode | undefined;
  /** Every shard change seen, oldest first. */
  readonly changes: ShardChange[] = [];
  /** Maps applied by the subscribers (each one checked). */
  mapsChecked = 0;
  readonly doubleOwned: DoubleOwnership[] = [];
  /** Times the subscribers were opened again on another node. */
  rehosted = 0;
  /** Samples of what every live node runs (`ShardherdNode.running()`). */
  runningSamples = 0;
  readonly runningOverlaps: RunningOverlap[] = [];

  constructor(
    private readonly cluster: EmbeddedCluster,
    readonly datasets: readonly DatasetRef[],
    private readonly now: () => number,
  ) {}

  /** The node the subscribers run on. */
  get host(): ShardherdNode | undefined {
    return this.hostNode;
  }

  /** Subscribes to every dataset from `node`. */
  open(node: ShardherdNode): void {
    this.close();
    this.hostNode = node;
    for (const ds of this.datasets) {
      this.subscribers.set(ds, new ShardEventSubscriber(node, ds, (map, message) => this.onMap(ds, map, message.type)));
    }
  }

  /**
   * If the host is gone (killed, stopped), subscribes again from a live node that is not `avoid`
   * (and not the singleton's, if it can).
   * The new subscribers start from the singleton's snapshot. Returns whether it moved.
   */
  ensureHost(avoid: readonly ShardherdNode[] = []): boolean {
    const h = this.hostNode;
    if (!h) return false; // not opened yet
    if (h.state === 'running' && h.isMember && !avoid.includes(h)) return false;
    // Not the oldest member if there is a choice: that is where the singleton runs.
    const oldest = this.cluster.membership.view().members[0]?.node;
    const candidates = this.cluster.nodes.filter((n) => n.state === 'running' && n.isMember && !avoid.includes(n));
    const next = candidates.find((n) => n.node !== oldest) ?? candidates[0];
    if (!next) return false;
    this.open(next);
    this.rehosted += 1;
    return true;
  }

  map(ds: DatasetRef): ShardMapper | undefined {
    return this.subscribers.get(ds)?.map;
  }

  epoch(ds: DatasetRef): number {
    return this.subscribers.get(ds)?.epoch ?? -1;
  }

  version(ds: DatasetRef): number {
    return this.subscribers.get(ds)?.version ?? -1;
  }

  /** Owners in order (repeats removed) of one shard, from the change at or after `since`. */
  ownersSince(ds: DatasetRef, shard: number, since: number): NodeId[] {
    const owners: NodeId[] = [];
    for (const c of this.changes) {
      if (c.at < since || c.dataset !== ds || c.shard !== shard || c.owner === undefined) continue;
      if (owners[owners.length - 1] !== c.owner) owners.push(c.owner);
    }
    return owners;
  }

  /**
   * Asks every running node which shards its ingestion runs now, and records any shard that two
   * of them run. A sample, not a proof: it sees the moments it asks at.
   */
  async sampleRunning(): Promise<void> {
    const nodes = this.cluster.nodes.filter((n) => n.state === 'running' && n.isMember);
    const answers = await Promise.all(nodes.map((n) => withTimeout(n.running(), 2_000).then((r) => ({ node: n.node, running: r }))));
    if (answers.some((a) => a.running === undefined)) return; // a node did not answer: no sample
    this.runningSamples += 1;
    const seen = new Map<string, NodeId[]>();
    for (const a of answers) for (const r of a.running!) seen.set(`${r.dataset}/${r.shard}`, [...(seen.get(`${r.dataset}/${r.shard}`) ?? []), a.node]);
    for (const [key, owners] of seen) {
      if (owners.length < 2) continue;
      const [dataset, shard] = key.split('/');
      this.runningOverlaps.push({ at: this.now(), dataset: dataset!, shard: Number(shard), nodes: owners });
    }
  }

  close(): void {
    for (const s of this.subscribers.values()) s.close();
    this.subscribers = new Map();
  }

  private onMap(ds: DatasetRef, map: ShardMapper, _kind: string): void {
    this.mapsChecked += 1;
    const sub = this.subscribers.get(ds);
    const epoch = sub?.epoch ?? -1;
    const version = map.version;
    for (let s = 0; s < map.numShards; s++) {
      const record = map.recordForShard(s);
      if (record.assignments.length > 1) {
        this.doubleOwned.push({ dataset: ds, shard: s, owners: record.assignments.map((a) => a.node), epoch, version });
      }
      const owner = record.assignments[0]?.node;
      const key = `${ds}/${s}`;
      const prev = this.last.get(key);
      if (!prev || prev.owner !== owner || prev.status !== record.status.type) {
        this.last.set(key, { owner, status: record.status.type });
        this.changes.push({ at: this.now(), dataset: ds, shard: s, owner, status: record.status.type, epoch, version });
      }
    }
  }
}

/** `p`, or undefined if it has not settled after `ms` of real time (a guard, not a measure). */
function withTimeout<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
