// The singleton: wraps ShardManager.decide, feeds it the inbox, membership and timers, and carries
// out its effects in order (persist, then publish and send, then reply and acknowledge). Its logic
// is a pure step (`singleton/step.ts`); its shell (`singleton/shell.ts`) spawns it and performs
// what the step decides.
import type { Epoch } from '../core/ids.js';
import type { NodeEnv } from './node-env.js';
import type { ActorRef } from './runtime.js';
import { spawnSingleton, type ClusterMsg, type SingletonCallbacks } from './singleton/shell.js';

export type { ClusterMsg, SingletonCallbacks } from './singleton/shell.js';

export function spawnNodeClusterActor(env: NodeEnv, parent: ActorRef<unknown>, epoch: Epoch, callbacks: SingletonCallbacks): ActorRef<ClusterMsg> {
  return spawnSingleton(env, parent, epoch, callbacks);
}
