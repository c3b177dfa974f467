// A query router's view of a dataset: shard key + spread → shards (FiloDB's arithmetic), shard →
// the nodes that serve it (Available/Active copies; Leaving copies serve until removed), and what
// the nodes answer when its map is stale (MOVED: learn it now, not at the next snapshot; ASK:
// follow it once, the map is not wrong).
import type { DatasetRef, NodeId, ShardNum } from '../core/ids.js';
import type { ShardCheck } from '../core/shard-check.js';
import { queryShards } from '../core/spread.js';
import { ShardEventSubscriber } from './shard-event-subscriber.js';
import type { ShardherdNode } from '../actors/node-process.js';

/** Why a routed request gave up: typed, never an endless loop. */
export class RoutingError extends Error {
  constructor(
    readonly reason: 'no-serving-node' | 'too-many-redirects' | 'unknown',
    readonly shard: number,
    message: string,
  ) {
    super(message);
    this.name = 'RoutingError';
  }
}

/** What a node answered to a routed request: its check, and the payload when it served it. */
export type RoutedAnswer<T> = { readonly check: ShardCheck; readonly value?: T };

export interface ShardRouterOptions {
  /** Redirections (MOVED, ASK, TRYAGAIN) followed per request before a `too-many-redirects` error. Default 3. */
  readonly maxHops?: number;
}

export class ShardRouter {
  private readonly subscriber: ShardEventSubscriber;
  /** Shard → nodes learned from MOVED answers, kept until the router's own map reaches `version`. */
  private readonly moved = new Map<number, { nodes: readonly NodeId[]; version: number }>();
  private readonly maxHops: number;

  constructor(node: ShardherdNode, readonly dataset: DatasetRef, options: ShardRouterOptions = {}) {
    this.subscriber = new ShardEventSubscriber(node, dataset, (map) => {
      for (const [shard, learned] of this.moved) if (map.version >= learned.version) this.moved.delete(shard);
    });
    this.maxHops = options.maxHops ?? 3;
  }

  /** The router's map version (0 before its first snapshot). */
  get version(): number {
    return this.subscriber.version;
  }

  /** The shards a query for this shard key must visit (FiloDB's spread arithmetic). */
  shardsFor(shardKeyHash: number, spread: number): ShardNum[] {
    const map = this.subscriber.map;
    if (!map) throw new RoutingError('unknown', -1, `no map of ${this.dataset} yet`);
    return queryShards(map.numShards, shardKeyHash, spread);
  }

  /** Nodes serving `shard`: what a MOVED answer taught, else the map's serving copies. */
  nodesFor(shard: number): readonly NodeId[] {
    const learned = this.moved.get(shard);
    if (learned) return learned.nodes;
    return this.subscriber.map?.servingNodes(shard) ?? [];
  }

  /** Applies a node's answer: MOVED updates the shard's nodes at once; the others change nothing. */
  learn(shard: number, check: ShardCheck): void {
    if (check.type === 'moved' && check.version > this.version) this.moved.set(shard, { nodes: check.nodes, version: check.version });
  }

  /**
   * Sends a request for `shard` to a node that serves it and follows the redirections: MOVED (learned
   * for later requests too), ASK (this once), TRYAGAIN (the next serving node). `send(node, version)`
   * asks `node` with the router's map version and returns its check and, when `ok`, the payload.
   */
  async request<T>(shard: number, send: (node: NodeId, routerVersion: number) => Promise<RoutedAnswer<T>>): Promise<T | undefined> {
    let candidates = [...this.nodesFor(shard)];
    if (candidates.length === 0) throw new RoutingError('no-serving-node', shard, `no node serves ${this.dataset}/${shard} in the router's map (version ${this.version})`);
    let asked: NodeId | undefined;
    for (let hop = 0; hop <= this.maxHops; hop++) {
      const node = asked ?? candidates.shift();
      asked = undefined;
      if (node === undefined) break;
      const { check, value } = await send(node, this.version);
      switch (check.type) {
        case 'ok':
          return value;
        case 'moved':
          this.learn(shard, check);
          candidates = [...check.nodes];
          break;
        case 'ask':
          asked = check.node;
          break;
        case 'tryagain':
          break;
        case 'unknown':
          throw new RoutingError('unknown', shard, `${node} knows no ${this.dataset}/${shard}: ${check.reason}`);
      }
    }
    throw new RoutingError('too-many-redirects', shard, `${this.dataset}/${shard}: no serving node after ${this.maxHops} redirections`);
  }

  close(): void {
    this.subscriber.close();
  }
}
