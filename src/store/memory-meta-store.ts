import type { DatasetConfig } from '../core/dataset-config.js';
import type { DatasetRef, Epoch, Incarnation, NodeId } from '../core/ids.js';
import type { ShardMapSnapshot } from '../core/shard-map-snapshot.js';
import type { AppliedRequest, NodeOperations } from '../core/shard-manager/protocol.js';
import * as ops from './meta-state.js';
import type { FencingToken } from '../core/fencing-token.js';
import { MetaStoreUnavailableError, type Lease, type MetaStore, type ShardCheckpoints, type StoredCooldown, type StoredSubscriptions } from './meta-store.js';

export interface MemoryMetaStoreOptions {
  /**
   * Called before every operation with its method name (`readLease`, `takeLease`, `putDataset`,
   * ...): true makes that call reject with `MetaStoreUnavailableError` without changing anything.
   */
  readonly faults?: (operation: string) => boolean;
}

/**
 * The MetaStore of embedded mode, tests and the simulator. Every operation takes effect
 * atomically when it is called (before its promise settles), so of two racing `takeLease` calls
 * the one called first wins. Values are copied in and out. Semantics: see `meta-state.ts`.
 */
export class MemoryMetaStore implements MetaStore {
  private readonly state = ops.emptyMetaState();
  private failingWrites = 0;
  private readonly faults: ((operation: string) => boolean) | undefined;

  constructor(options: MemoryMetaStoreOptions = {}) {
    this.faults = options.faults;
  }

  /** The next `n` write operations (lease, dataset, map, cooldown, checkpoint) reject with `MetaStoreUnavailableError`. */
  failWrites(n: number): void {
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`failWrites needs a non-negative integer, got ${n}`);
    this.failingWrites = n;
  }

  async readLease(): Promise<Lease | undefined> {
    this.gate('readLease', false);
    return ops.readLease(this.state);
  }

  async takeLease(node: NodeId, incarnation: Incarnation, expectedEpoch: number, expectedRenewal?: number): Promise<Lease | undefined> {
    this.gate('takeLease', true);
    return ops.takeLease(this.state, node, incarnation, expectedEpoch, expectedRenewal);
  }

  async renewLease(epoch: Epoch, renewal: number): Promise<boolean> {
    this.gate('renewLease', true);
    return ops.renewLease(this.state, epoch, renewal);
  }

  async putDataset(config: DatasetConfig, epoch: Epoch): Promise<void> {
    this.gate('putDataset', true);
    ops.putDataset(this.state, config, epoch);
  }

  async deleteDataset(dataset: DatasetRef, epoch: Epoch): Promise<void> {
    this.gate('deleteDataset', true);
    ops.deleteDataset(this.state, dataset, epoch);
  }

  async datasets(): Promise<DatasetConfig[]> {
    this.gate('datasets', false);
    return ops.datasets(this.state);
  }

  async putShardMap(snapshot: ShardMapSnapshot): Promise<void> {
    this.gate('putShardMap', true);
    ops.putShardMap(this.state, snapshot);
  }

  async shardMaps(): Promise<ShardMapSnapshot[]> {
    this.gate('shardMaps', false);
    return ops.shardMaps(this.state);
  }

  async putCooldown(cooldown: StoredCooldown, epoch: Epoch): Promise<void> {
    this.gate('putCooldown', true);
    ops.putCooldown(this.state, cooldown, epoch);
  }

  async putSubscriptions(subscriptions: StoredSubscriptions, epoch: Epoch): Promise<void> {
    this.gate('putSubscriptions', true);
    ops.putSubscriptions(this.state, subscriptions, epoch);
  }

  async putNodeOperations(operations: NodeOperations, epoch: Epoch): Promise<void> {
    this.gate('putNodeOperations', true);
    ops.putNodeOperations(this.state, operations, epoch);
  }

  async nodeOperations(): Promise<NodeOperations> {
    this.gate('nodeOperations', false);
    return ops.nodeOperations(this.state);
  }

  async putAppliedRequests(applied: readonly AppliedRequest[], epoch: Epoch): Promise<void> {
    this.gate('putAppliedRequests', true);
    ops.putAppliedRequests(this.state, applied, epoch);
  }

  async appliedRequests(): Promise<AppliedRequest[]> {
    this.gate('appliedRequests', false);
    return ops.appliedRequests(this.state);
  }

  async subscriptions(): Promise<StoredSubscriptions> {
    this.gate('subscriptions', false);
    return ops.subscriptions(this.state);
  }

  async cooldowns(): Promise<StoredCooldown[]> {
    this.gate('cooldowns', false);
    return ops.cooldowns(this.state);
  }

  async writeCheckpoint(dataset: DatasetRef, shard: number, node: NodeId, group: string, offset: number, token: FencingToken): Promise<void> {
    this.gate('writeCheckpoint', true);
    ops.writeCheckpoint(this.state, dataset, shard, node, group, offset, token);
  }

  async readCheckpoints(dataset: DatasetRef, shard: number): Promise<ShardCheckpoints> {
    this.gate('readCheckpoints', false);
    return ops.readCheckpoints(this.state, dataset, shard);
  }

  async readCheckpointsOf(dataset: DatasetRef, shards: readonly number[]): Promise<ReadonlyMap<number, ShardCheckpoints>> {
    this.gate('readCheckpointsOf', false);
    return ops.readCheckpointsOf(this.state, dataset, shards);
  }

  private gate(operation: string, isWrite: boolean): void {
    if (isWrite && this.failingWrites > 0) {
      this.failingWrites -= 1;
      throw new MetaStoreUnavailableError(operation, new Error('injected write failure'));
    }
    if (this.faults?.(operation)) throw new MetaStoreUnavailableError(operation, new Error('injected fault'));
  }
}
