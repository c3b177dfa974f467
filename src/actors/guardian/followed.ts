// The node's copy of every map (`FollowedMaps`), wired to its coordinator, its local subscribers and
// the singleton. Its ports are called inside the guardian's map operations and, for a whole map
// handled unread (`EventsSkip`), outside its mailbox: they act at once.
import type { Cancel } from '../../cluster/clock.js';
import type { SubscriberId } from '../../core/ids.js';
import type { SubscriberMessage } from '../../core/shard-manager/protocol.js';
import { NEWEST_MAP_FORMAT } from '../../core/map-codec.js';
import { FollowedMaps } from '../../protocol/followed-maps.js';
import type { Request } from '../../protocol/wire.js';
import type { CoordinatorMsg } from '../node-coordinator.js';
import type { NodeEnv } from '../node-env.js';
import type { NodeHub } from '../node-hub.js';
import type { ActorRef } from '../runtime.js';
import type { GuardianMsg } from './effects.js';

export interface FollowedWiring {
  readonly env: NodeEnv;
  readonly hub: NodeHub;
  readonly self: ActorRef<GuardianMsg>;
  readonly coordinator: ActorRef<CoordinatorMsg>;
  readonly guardianId: SubscriberId;
  readonly hostPrefix: string;
  readonly request: (r: Request) => Promise<unknown>;
  /** The timer of the `SyncMaps` on its way. */
  readonly timers: { sync?: Cancel | undefined };
}

export function followedMaps(w: FollowedWiring): FollowedMaps {
  const { env, coordinator } = w;
  const maps: FollowedMaps = new FollowedMaps(
    {
      mapChanged: (dataset, follower, config, shards) => {
        const madeFor = maps.madeForMembers(dataset);
        env.runtime.send(coordinator, {
          type: 'MapState',
          dataset,
          epoch: follower.epoch,
          mapper: follower.mapper!,
          config,
          ...(shards ? { shards } : {}),
          ...(madeFor === undefined ? {} : { madeFor }),
        });
      },
      membersChanged: (members) => {
        const admission = maps.admission;
        env.runtime.send(coordinator, { type: 'Members', members, ...(admission ? { admission } : {}) });
      },
      datasetGone: (dataset) => {
        env.runtime.send(coordinator, { type: 'DatasetGone', dataset });
        env.telemetry.datasetRemoved(dataset);
      },
      deliver: (dataset, message, only) => {
        if (only === undefined) return w.hub.deliverToDataset(dataset, message);
        let built: SubscriberMessage | undefined;
        for (const id of only) if (id !== w.guardianId && id.startsWith(w.hostPrefix)) w.hub.deliver(id, (built ??= message()));
      },
      askSync: (wanted) => {
        w.timers.sync?.();
        // An answer lost on the bus (or never sent) is asked for again, at the pace of reports, and
        // more slowly while no answer comes (a singleton busy with a large decision).
        w.timers.sync = env.clock.schedule(env.settings.reportResendMs * maps.syncWaitFactor, () => env.runtime.send(w.self, { type: 'SyncTimeout' }));
        env.log.debug({ ...wanted }, 'this node is behind on some maps: asking the singleton');
        void w
          .request({ type: 'SyncMaps', subscriber: w.guardianId, ...wanted, mapFormat: NEWEST_MAP_FORMAT })
          .catch((e: unknown) => env.log.warn({ err: e }, 'asking the singleton for maps failed; asked again later'));
      },
    },
    { node: env.node, incarnation: env.incarnation },
  );
  return maps;
}
