import type { ShardherdNode } from '../actors/node-process.js';
import type { Member, RecoveryData, RunningShard } from '../core/shard-manager/protocol.js';
import type { ShardMapSnapshot } from '../core/shard-map-snapshot.js';

/** A node as JSON: its identity and membership, the shards it runs, and the singleton's state if it hosts it. */
export interface NodeStatus {
  readonly node: string;
  readonly incarnation: string | undefined;
  readonly pid: number;
  readonly state: ShardherdNode['state'];
  readonly member: boolean;
  readonly running: readonly RunningShard[];
  /** The newest singleton epoch this node has heard of. */
  readonly knownEpoch: number | undefined;
  readonly singleton: SingletonStatus | undefined;
}

export interface SingletonStatus {
  readonly epoch: number;
  readonly members: readonly Member[];
  readonly maps: readonly ShardMapSnapshot[];
  readonly subscriptions: RecoveryData['subscriptions'];
  readonly watchers: RecoveryData['watchers'];
}

export async function nodeStatus(node: ShardherdNode): Promise<NodeStatus> {
  const [running, state, cache] = await Promise.all([node.running(), node.singletonState(), node.cache()]);
  return {
    node: node.node,
    incarnation: node.incarnation,
    pid: process.pid,
    state: node.state,
    member: node.isMember,
    running,
    knownEpoch: cache?.maxEpoch,
    singleton:
      state === undefined
        ? undefined
        : {
            epoch: state.epoch,
            members: state.members,
            maps: [...state.datasets.values()].map((d) => d.mapper.toSnapshot(state.epoch)),
            subscriptions: state.subscriptions.toList(),
            watchers: state.subscriptions.watcherList(),
          },
  };
}
