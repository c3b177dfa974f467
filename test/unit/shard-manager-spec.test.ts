// FiloDB's ShardManagerSpec (reference §7.1), step by step with the same inputs and outputs.
// ds1 has 8 shards and minNumNodes 3; ds2 has 16 shards and minNumNodes 2; `sub` is a watcher.
// "Msgs: X each" becomes: the map's changes go out once, in one record every node reads (FiloDB
// sends each node a message of its own); a change of the members is published as such.
// Subscribers get a snapshot, then each change as a stamped event (FiloDB sends only snapshots).
import { describe, expect, it } from 'vitest';
import { epoch } from '../../src/core/ids.js';
import type { ShardMapSnapshot } from '../../src/core/shard-map-snapshot.js';
import { ShardEvents } from '../../src/core/status.js';
import { ShardManager } from '../../src/core/shard-manager/shard-manager.js';
import type { SubscriberMessage } from '../../src/core/shard-manager/protocol.js';
import { ShardMapFollower } from '../../src/core/map-follower.js';
import {
  adminReplyTo,
  changesOf,
  mapsPublished,
  membersChange,
  ds1,
  ds2,
  Harness,
  HOUR,
  messagesTo,
  n,
  replyOf,
  sub,
  visible,
} from '../support/manager-harness.js';

describe('ShardManagerSpec (FiloDB reference §7.1), sequential', () => {
  const h = new Harness();
  const follower1 = new ShardMapFollower(ds1);
  const follow = (msgs: SubscriberMessage[]) => {
    for (const m of msgs) {
      if (m.type === 'CurrentShardSnapshot' && m.snapshot.dataset === ds1) expect(follower1.applySnapshot(m.snapshot)).toBe('applied');
      if (m.type === 'StampedShardEvent' && m.event.dataset === ds1) expect(follower1.applyEvent(m)).toBe('applied');
    }
  };

  it('1. SubscribeAll with no datasets: sub gets the subscriptions (none, itself a watcher) and no snapshot', () => {
    const msgs = messagesTo(h.run({ type: 'SubscribeAll', subscriber: sub }), sub);
    expect(msgs).toEqual([{ type: 'ShardSubscriptions', epoch: 1, subscriptions: [], watchers: [sub] }]);
  });

  it('2-4. members c1, c2, c3 join with no dataset: only the change of the members is published', () => {
    for (const c of ['c1', 'c2', 'c3']) {
      expect(visible(h.addMember(c)).map((e) => e.type)).toEqual(['PublishMembersChange']);
      expect(membersChange(h.effects)).toEqual({ joined: [c], left: [] });
    }
    expect(h.memberOrder()).toEqual(['c1', 'c2', 'c3']);
  });

  it('5. c2 leaves: only the change of the members is published', () => {
    expect(membersChange(h.removeMember('c2'))).toEqual({ joined: [], left: ['c2'] });
    expect(visible(h.effects).map((e) => e.type)).toEqual(['PublishMembersChange']);
  });

  it('6. SetupDataset(ds1) assigns newest first: c3 = [0,1,2], c1 = [3,4,5]; 6 and 7 wait for a third node', () => {
    expect(h.setup(ds1, 8, 3)).toEqual({ type: 'DatasetVerified', dataset: ds1 });
    expect(h.shardsByNode(ds1)).toEqual({ c1: [3, 4, 5], c3: [0, 1, 2] });
    expect(h.mapper(ds1).unassignedShards()).toEqual([6, 7]);
    expect(mapsPublished(h.effects)).toEqual([ds1]);
  });

  it('7. sub gets the subscriptions, then one snapshot (FiloDB sends the same snapshot twice: a redundant publish we drop)', () => {
    const msgs = messagesTo(h.effects, sub);
    expect(msgs.map((m) => m.type)).toEqual(['ShardSubscriptions', 'CurrentShardSnapshot']);
    expect(msgs[0]).toMatchObject({ subscriptions: [{ dataset: ds1, subscribers: [sub] }], watchers: [sub] });
    follow(msgs);
    expect(follower1.mapper!.equals(h.mapper(ds1))).toBe(true);
  });

  it('8. c2 joins again (last in order) and takes [6,7]; c1, c2, c3 get one state each, sub the two assignments', () => {
    h.addMember('c2');
    expect(h.memberOrder()).toEqual(['c1', 'c3', 'c2']);
    expect(h.shardsByNode(ds1)).toEqual({ c1: [3, 4, 5], c3: [0, 1, 2], c2: [6, 7] });
    expect(mapsPublished(h.effects)).toEqual([ds1]);
    const msgs = messagesTo(h.effects, sub);
    expect(msgs.map((m) => m.type === 'StampedShardEvent' && [m.event.type, m.event.shard, m.event.node])).toEqual([
      ['ShardAssignmentStarted', 6, 'c2'],
      ['ShardAssignmentStarted', 7, 'c2'],
    ]);
    follow(msgs);
    expect(follower1.mapper!.equals(h.mapper(ds1))).toBe(true);
  });

  it('9. c4 joins as a spare: no map changes, only the members', () => {
    expect(visible(h.addMember('c4')).map((e) => e.type)).toEqual(['PublishMembersChange']);
    expect(h.memberOrder()).toEqual(['c1', 'c3', 'c2', 'c4']);
  });

  it('10. c1 leaves: the spare c4 takes all of [3,4,5]; c2, c3, c4 get one state each, c1 none', () => {
    follow(messagesTo(h.removeMember('c1'), sub));
    expect(h.memberOrder()).toEqual(['c3', 'c2', 'c4']);
    expect(h.shardsByNode(ds1)).toEqual({ c3: [0, 1, 2], c2: [6, 7], c4: [3, 4, 5] });
    expect(mapsPublished(h.effects)).toEqual([ds1]);
    expect(follower1.mapper!.equals(h.mapper(ds1))).toBe(true);
  });

  it('11. c4 leaves with no spare left: c2 tops up to [3,6,7]; 4 and 5 stay unassigned', () => {
    follow(messagesTo(h.removeMember('c4'), sub));
    expect(h.shardsByNode(ds1)).toEqual({ c3: [0, 1, 2], c2: [3, 6, 7] });
    expect(h.mapper(ds1).unassignedShards()).toEqual([4, 5]);
    expect(h.mapper(ds1).numAssignedShards).toBe(6);
    expect(mapsPublished(h.effects)).toEqual([ds1]);
  });

  it('12. c4 joins again and takes [4,5]: nothing is unassigned', () => {
    follow(messagesTo(h.addMember('c4'), sub));
    expect(h.memberOrder()).toEqual(['c3', 'c2', 'c4']);
    expect(h.shardsByNode(ds1)).toEqual({ c3: [0, 1, 2], c2: [3, 6, 7], c4: [4, 5] });
    expect(h.mapper(ds1).unassignedShards()).toEqual([]);
    expect(mapsPublished(h.effects)).toEqual([ds1]);
  });

  const firstErrorAt = h.now + 1000;

  it('13. IngestionError on shard 0 from its owner c3: it moves to another node (c4) and its cooldown starts', () => {
    h.now = firstErrorAt;
    const effects = h.report('c3', ShardEvents.ingestionError(ds1, 0 as never, n('c3'), 'disk full'));
    follow(messagesTo(effects, sub));
    expect(h.shardsByNode(ds1)).toEqual({ c3: [1, 2], c2: [3, 6, 7], c4: [0, 4, 5] });
    expect(mapsPublished(effects)).toEqual([ds1]);
    expect(effects).toContainEqual({ type: 'PersistCooldown', dataset: ds1, shard: 0, reassignedAt: firstErrorAt });
  });

  it('14. a second IngestionError on shard 0 inside the cooldown: not moved; it stays unassigned, in Error', () => {
    h.now = firstErrorAt + HOUR;
    const effects = h.report('c4', ShardEvents.ingestionError(ds1, 0 as never, n('c4'), 'disk full again'));
    follow(messagesTo(effects, sub));
    expect(h.shardsByNode(ds1)).toEqual({ c3: [1, 2], c2: [3, 6, 7], c4: [4, 5] });
    expect(h.mapper(ds1).statusForShard(0)).toEqual({ type: 'Error', message: 'disk full again' });
    expect(follower1.mapper!.unassignedShards()).toEqual([0]);
    // It is looked at again just after the cooldown ends, not before.
    expect(effects).toContainEqual({ type: 'ScheduleCheck', at: firstErrorAt + 2 * HOUR + 1 });
  });

  it('15. RemoveDataset(ds1): every node gets the changes that leave nothing assigned; no subscription is left', () => {
    const effects = h.run({ type: 'RemoveDataset', dataset: ds1, replyTo: adminReplyTo() });
    expect(replyOf(effects)).toEqual({ type: 'Success' });
    const changes = changesOf(effects);
    expect(changes).toHaveLength(1);
    const finalMap = follower1.mapper!.clone();
    for (const e of changes[0]!.events) finalMap.updateFromEvent(e);
    expect(finalMap.numAssignedShards).toBe(0);
    expect(h.state.subscriptions.datasets()).toEqual([]);
    const msgs = messagesTo(effects, sub);
    expect(msgs.filter((m) => m.type === 'StampedShardEvent')).toHaveLength(7); // the 7 owned shards go down
    expect(msgs.slice(-2).map((m) => m.type)).toEqual(['DatasetRemoved', 'ShardSubscriptions']);
    expect(effects).toContainEqual({ type: 'DeleteDataset', dataset: ds1 });
  });

  let oldMaps: ShardMapSnapshot[] = [];

  it('16. c1 joins; ds1 and ds2 are set up again, newest first over [c3, c2, c4, c1]', () => {
    h.addMember('c1');
    expect(h.memberOrder()).toEqual(['c3', 'c2', 'c4', 'c1']);
    expect(h.setup(ds1, 8, 3)).toEqual({ type: 'DatasetVerified', dataset: ds1 });
    expect(h.shardsByNode(ds1)).toEqual({ c1: [0, 1, 2], c4: [3, 4, 5], c2: [6, 7], c3: [] });
    expect(mapsPublished(h.effects)).toEqual([ds1]);
    expect(messagesTo(h.effects, sub).map((m) => m.type)).toEqual(['ShardSubscriptions', 'CurrentShardSnapshot']);

    expect(h.setup(ds2, 16, 2)).toEqual({ type: 'DatasetVerified', dataset: ds2 });
    expect(h.shardsByNode(ds2)).toEqual({ c1: [0, 1, 2, 3, 4, 5, 6, 7], c4: [8, 9, 10, 11, 12, 13, 14, 15], c2: [], c3: [] });
    expect(mapsPublished(h.effects)).toEqual([ds2]);
    const msgs = messagesTo(h.effects, sub);
    expect(msgs.map((m) => m.type)).toEqual(['ShardSubscriptions', 'CurrentShardSnapshot']);
    expect(msgs[0]).toMatchObject({ subscriptions: [{ dataset: ds1 }, { dataset: ds2 }] });
    oldMaps = [h.mapper(ds1).toSnapshot(h.state.epoch), h.mapper(ds2).toSnapshot(h.state.epoch)];
  });

  it('17. failover: a new singleton recovers maps and subscriptions; then c4 leaves and its shards go to c2 and c3', () => {
    const next = new Harness(
      {},
      {
        epoch: epoch(2),
        datasets: [h.state.datasets.get(ds1)!.config, h.state.datasets.get(ds2)!.config],
        maps: oldMaps,
        subscriptions: h.state.subscriptions.toList(),
        watchers: h.state.subscriptions.watcherList(),
        cooldowns: [],
        members: h.state.members,
        running: [],
      },
    );
    expect(next.memberOrder()).toEqual(['c3', 'c2', 'c4', 'c1']);
    expect(next.mapper(ds1).equals(h.mapper(ds1))).toBe(true);
    expect(next.mapper(ds2).equals(h.mapper(ds2))).toBe(true);
    // FiloDB's recovery sends nothing; ours continues each map under the new epoch, which is what
    // makes nodes and routers ignore the old singleton from now on: one record per dataset saying
    // "the map you hold at epoch 1 goes on at epoch 2" (with the changes recovery made: none here),
    // not the whole map again.
    expect(changesOf(next.effects).map((c) => [c.dataset, c.epoch, c.base, c.events.length])).toEqual([
      [ds1, 2, { epoch: 1, version: oldMaps[0]!.version }, 0],
      [ds2, 2, { epoch: 1, version: oldMaps[1]!.version }, 0],
    ]);
    const follower = new ShardMapFollower(ds1);
    follower.applySnapshot(oldMaps[0]!);
    expect(follower.applyChanges(changesOf(next.effects)[0]!)).toBe('applied');
    expect([follower.epoch, follower.version]).toEqual([2, oldMaps[0]!.version]);

    next.removeMember('c4');
    expect(next.memberOrder()).toEqual(['c3', 'c2', 'c1']);
    expect(next.shardsByNode(ds2)).toEqual({ c1: [0, 1, 2, 3, 4, 5, 6, 7], c2: [8, 9, 10, 11, 12, 13, 14, 15], c3: [] });
    expect(next.shardsByNode(ds1)).toEqual({ c1: [0, 1, 2], c2: [3, 6, 7], c3: [4, 5] });
    expect(mapsPublished(next.effects).sort()).toEqual([ds1, ds2]);
    const datasetsTold = messagesTo(next.effects, sub).flatMap((m) => (m.type === 'StampedShardEvent' ? [m.event.dataset] : []));
    expect(new Set(datasetsTold)).toEqual(new Set([ds1, ds2]));
  });

  it('the manager is deterministic: the same inputs at the same times give the same effects', () => {
    const run = () => {
      const x = new Harness();
      x.run({ type: 'SubscribeAll', subscriber: sub });
      for (const c of ['c1', 'c2', 'c3']) x.addMember(c);
      x.setup(ds1, 8, 3);
      x.removeMember('c2');
      return [x.effects, x.mapper(ds1).toSnapshot(x.state.epoch)];
    };
    expect(run()).toEqual(run());
    expect(new ShardManager().initialState().phase).toBe('recovering');
  });
});
