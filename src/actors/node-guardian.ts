// A node's top actor. It supervises the node's coordinator and reporter, follows every dataset's
// map from the events topic (changes applied, whole maps only when behind: `FollowedMaps`), hands
// its maps and the members to the coordinator, which runs what they give this node, relays them to
// local subscribers, routes acknowledgements to the reporter and replies to waiting requests,
// keeps the maps for the next singleton's recovery, and hosts the singleton
// when its node is the oldest member.
//
// Its logic is a pure step (`guardian/step.ts`) and a shell that performs its effects (`guardian/shell.ts`).
import type { ActorRef } from './runtime.js';
import type { NodeEnv } from './node-env.js';
import type { NodeHub } from './node-hub.js';
import type { GuardianMsg } from './guardian/effects.js';
import type { GuardianOutside } from './guardian/outside.js';
import { spawnGuardian, type GuardianCallbacks } from './guardian/shell.js';

export type { GuardianMsg } from './guardian/effects.js';
export type { GuardianCallbacks } from './guardian/shell.js';
export { EventsSkip, GuardianOutlook, NOTHING_RUNNING, type GuardianCache, type GuardianOutside } from './guardian/outside.js';

export function spawnNodeGuardian(env: NodeEnv, hub: NodeHub, callbacks: GuardianCallbacks, outside?: GuardianOutside): ActorRef<GuardianMsg> {
  return spawnGuardian(env, hub, callbacks, outside);
}
