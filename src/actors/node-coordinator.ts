// Level-triggered: runs exactly the shards the latest desired state gives this node (in a status
// that ingests) and stops the rest. A lost or late message heals at the next desired state; a
// desired state from an older epoch (a replaced singleton) or an older version changes nothing.
import type { DatasetConfig } from '../core/dataset-config.js';
import type { DatasetRef, Epoch, ShardNum } from '../core/ids.js';
import { ShardMapFollower } from '../core/map-follower.js';
import type { ShardMapSnapshot } from '../core/shard-map-snapshot.js';
import type { RunningShard } from '../core/shard-manager/protocol.js';
import { isIngestionStatus, type ShardStatus, Status } from '../core/status.js';
import { spawnIngestionActor, type IngestionMsg, type ShardStatusUpdate } from './ingestion-actor.js';
import type { NodeEnv } from './node-env.js';
import type { ReporterMsg } from './reporter.js';
import type { ActorRef } from './runtime.js';

export type CoordinatorMsg =
  | { readonly type: 'DesiredState'; readonly epoch: Epoch; readonly snapshot: ShardMapSnapshot; readonly config: DatasetConfig }
  | { readonly type: 'StopAll'; readonly reason: string }
  | { readonly type: 'GetRunning'; readonly reply: (running: RunningShard[]) => void }
  | ShardStatusUpdate;

interface Running {
  readonly ref: ActorRef<IngestionMsg>;
  readonly dataset: DatasetRef;
  readonly shard: ShardNum;
  status: ShardStatus;
}

interface State {
  maxEpoch: number;
  readonly followers: Map<DatasetRef, ShardMapFollower>;
  /** `dataset/shard` → the ingestion running it. */
  readonly running: Map<string, Running>;
}

export function spawnNodeCoordinator(env: NodeEnv, parent: ActorRef<unknown>, reporter: ActorRef<ReporterMsg>): ActorRef<CoordinatorMsg> {
  const stopShard = (s: State, key: string, why: string) => {
    const r = s.running.get(key)!;
    s.running.delete(key);
    env.runtime.stop(r.ref);
    env.log.info({ dataset: r.dataset, shard: r.shard, why }, 'shard stopped');
  };

  const initialState: State = { maxEpoch: -1, followers: new Map(), running: new Map() };
  return env.runtime.spawn<State, CoordinatorMsg>(parent, 'coordinator', (s, msg, ctx) => {
    switch (msg.type) {
      case 'DesiredState': {
        if (msg.epoch < s.maxEpoch) {
          env.log.debug({ epoch: msg.epoch, current: s.maxEpoch }, 'desired state from a replaced singleton ignored');
          return s;
        }
        s.maxEpoch = msg.epoch;
        const ref = msg.snapshot.dataset;
        const follower = s.followers.get(ref) ?? new ShardMapFollower(ref);
        s.followers.set(ref, follower);
        if (follower.applySnapshot(msg.snapshot) !== 'applied') return s;
        const mapper = follower.mapper!;
        // Every copy this node holds, Leaving ones included: a handoff's old copy ingests until it is removed.
        const wanted = new Set(mapper.copiesForNode(env.node).filter((c) => isIngestionStatus(c.copy.status)).map((c) => c.shard));
        for (const [key, r] of [...s.running]) if (r.dataset === ref && !wanted.has(r.shard)) stopShard(s, key, 'the map no longer gives it to this node');
        for (const shard of wanted) {
          const key = `${ref}/${shard}`;
          if (s.running.has(key)) continue;
          const actor = spawnIngestionActor(env, ctx.self, msg.config, shard, reporter, (u) => env.runtime.send(ctx.self, u));
          s.running.set(key, { ref: actor, dataset: ref, shard, status: Status.assigned });
        }
        return s;
      }
      case 'StopAll':
        for (const key of [...s.running.keys()]) stopShard(s, key, msg.reason);
        return s;
      case 'ShardStatus': {
        const r = s.running.get(`${msg.dataset}/${msg.shard}`);
        if (r) r.status = msg.status;
        return s;
      }
      case 'GetRunning':
        msg.reply([...s.running.values()].filter((r) => r.status.type !== 'Error').map((r) => ({ dataset: r.dataset, shard: r.shard, status: r.status })));
        return s;
    }
  }, { initialState, onCrash: 'resume' });
}
