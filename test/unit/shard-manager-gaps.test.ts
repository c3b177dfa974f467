// Where shardherd is better than FiloDB (docs/ARCHITECTURE.md §5, reference §7.7): each gap is a test.
import { describe, expect, it } from 'vitest';
import { incarnation, nodeId, replyTo, subscriberId, type ShardNum } from '../../src/core/ids.js';
import { ShardMapFollower } from '../../src/core/map-follower.js';
import { ShardEvents } from '../../src/core/status.js';
import type { Effect } from '../../src/core/shard-manager/protocol.js';
import { adminReplyTo, config, mapsPublished, ds1, Harness, HOUR, messagesTo, n, noticesNamed, replyOf, sub, visible } from '../support/manager-harness.js';

const s = (x: number) => x as ShardNum;

/** ds1 (8 shards, minNumNodes 3) over c1, c2, c3: c3 = [0,1,2], c2 = [3,4,5], c1 = [6,7]. */
function threeNodes(options = {}): Harness {
  const h = new Harness(options);
  for (const c of ['c1', 'c2', 'c3']) h.addMember(c);
  h.setup(ds1, 8, 3);
  expect(h.shardsByNode(ds1)).toEqual({ c1: [6, 7], c2: [3, 4, 5], c3: [0, 1, 2] });
  return h;
}

const indexOfType = (effects: readonly Effect[], type: Effect['type']) => effects.findIndex((e) => e.type === type);

describe('subscriptions end (FiloDB never unsubscribes)', () => {
  it('Unsubscribe stops the events of that dataset', () => {
    const h = threeNodes();
    const router = subscriberId('router');
    h.run({ type: 'Subscribe', subscriber: router, dataset: ds1 });
    expect(messagesTo(h.effects, router).map((m) => m.type)).toEqual(['CurrentShardSnapshot']);
    h.run({ type: 'Unsubscribe', subscriber: router, dataset: ds1 });
    h.removeMember('c1');
    expect(messagesTo(h.effects, router)).toEqual([]);
    expect(h.state.subscriptions.subscribersOf(ds1)).not.toContain(router);
  });

  it('a terminated subscriber is removed from every dataset and from the watchers', () => {
    const h = threeNodes();
    h.run({ type: 'SubscribeAll', subscriber: sub });
    const router = subscriberId('router');
    h.run({ type: 'Subscribe', subscriber: router, dataset: ds1 });
    h.run({ type: 'SubscriberTerminated', subscriber: sub });
    h.run({ type: 'SubscriberTerminated', subscriber: router });
    h.removeMember('c1');
    expect(messagesTo(h.effects, sub)).toEqual([]);
    expect(messagesTo(h.effects, router)).toEqual([]);
    expect(h.state.subscriptions.watcherList()).toEqual([]);
  });

  it('subscribing again resyncs: a fresh snapshot each time, one subscription', () => {
    const h = threeNodes();
    const router = subscriberId('router');
    h.run({ type: 'Subscribe', subscriber: router, dataset: ds1 });
    h.run({ type: 'Subscribe', subscriber: router, dataset: ds1 });
    expect(messagesTo(h.effects, router).map((m) => m.type)).toEqual(['CurrentShardSnapshot']);
    expect(h.state.subscriptions.subscribersOf(ds1)).toEqual([router]);
  });

  it('subscribing to an unknown dataset answers DatasetUnknown and subscribes to nothing', () => {
    const h = threeNodes();
    const router = subscriberId('router');
    h.run({ type: 'Subscribe', subscriber: router, dataset: 'nope' as never });
    expect(messagesTo(h.effects, router)).toEqual([{ type: 'DatasetUnknown', dataset: 'nope' }]);
  });
});

describe('node reports are acknowledged only after they are applied, persisted and published', () => {
  it('the ack comes after the map is persisted and the event published', () => {
    const h = threeNodes();
    h.run({ type: 'SubscribeAll', subscriber: sub });
    const effects = h.report('c3', ShardEvents.ingestionStarted(ds1, s(0), n('c3')));
    const persist = indexOfType(effects, 'PersistShardMap');
    const publish = indexOfType(effects, 'PublishChanges');
    const ack = indexOfType(effects, 'AckReport');
    expect(persist).toBeGreaterThanOrEqual(0);
    expect(publish).toBeGreaterThan(persist);
    expect(ack).toBeGreaterThan(publish);
    expect(effects[ack]).toEqual({ type: 'AckReport', node: 'c3', incarnation: 'c3#1', seq: 1 });
  });

  it('reports that arrived together are applied in one decision: one change record per dataset, each report acked after it', () => {
    const h = threeNodes();
    const m = (name: string) => h.state.members.find((x) => x.node === name)!;
    const before = h.mapper(ds1).version;
    const effects = h.run({
      type: 'NodeReports',
      reports: [
        { node: n('c3'), incarnation: m('c3').incarnation, seq: 4, events: [ShardEvents.ingestionStarted(ds1, s(0), n('c3'))] },
        {
          node: n('c2'),
          incarnation: m('c2').incarnation,
          seq: 9,
          events: [ShardEvents.ingestionStarted(ds1, s(3), n('c2')), ShardEvents.ingestionStarted(ds1, s(4), n('c2'))],
        },
      ],
    });
    const changes = effects.filter((e) => e.type === 'PublishChanges');
    expect(changes).toHaveLength(1);
    expect(changes[0]!.type === 'PublishChanges' && [changes[0]!.base.version, changes[0]!.events.map((e) => [e.shard, e.node])]).toEqual([
      before,
      [
        [0, 'c3'],
        [3, 'c2'],
        [4, 'c2'],
      ],
    ]);
    const acks = effects.flatMap((e, i) => (e.type === 'AckReport' ? [[i, e.node, e.seq]] : []));
    expect(acks.map(([, node, seq]) => [node, seq])).toEqual([
      ['c3', 4],
      ['c2', 9],
    ]);
    expect(acks.every(([i]) => (i as number) > effects.indexOf(changes[0]!))).toBe(true);
  });

  it('reports that arrive before recovery are buffered, then applied and acked after it (FiloDB acks and drops them)', () => {
    const h = threeNodes();
    const before = h.mapper(ds1).toSnapshot(h.state.epoch);
    const manager = h.manager;
    let state = manager.initialState();
    const report = {
      type: 'NodeReport',
      node: n('c3'),
      incarnation: incarnation('c3#1'),
      seq: 7,
      events: [ShardEvents.ingestionStarted(ds1, s(0), n('c3'))],
    } as const;
    const buffered = manager.decide(state, report, 0);
    expect(visible(buffered.effects)).toEqual([]); // not acked yet
    state = buffered.state;
    const recovered = manager.decide(
      state,
      {
        type: 'Recover',
        recovery: {
          epoch: 2 as never,
          datasets: [config(ds1, 8, 3)],
          maps: [before],
          subscriptions: [],
          watchers: [],
          cooldowns: [],
          members: h.state.members,
          running: [],
        },
      },
      0,
    );
    expect(recovered.state.datasets.get(ds1)!.mapper.statusForShard(0)).toEqual({ type: 'Active' });
    const snapshotAt = recovered.effects.findIndex((e) => e.type === 'PublishChanges');
    expect(snapshotAt).toBeGreaterThanOrEqual(0);
    const ackAt = recovered.effects.findIndex((e) => e.type === 'AckReport');
    expect(ackAt).toBeGreaterThan(snapshotAt);
    expect(recovered.effects[ackAt]).toMatchObject({ seq: 7 });
  });

  it('a report from a stale incarnation changes nothing but is acked (resending cannot help)', () => {
    const h = threeNodes();
    const version = h.mapper(ds1).version;
    const effects = h.run({
      type: 'NodeReport',
      node: n('c3'),
      incarnation: incarnation('c3#0'),
      seq: 3,
      events: [ShardEvents.ingestionError(ds1, s(0), n('c3'), 'x')],
    });
    expect(h.mapper(ds1).version).toBe(version);
    expect(visible(effects)).toEqual([{ type: 'AckReport', node: 'c3', incarnation: 'c3#0', seq: 3 }]);
    expect(noticesNamed(effects, 'report.rejected')[0]).toMatch(/incarnation/);
  });

  it('refuses events from non-owners, singleton-only events, unknown datasets and shard == numShards, without a crash', () => {
    const h = threeNodes();
    const version = h.mapper(ds1).version;
    const bad = [
      ShardEvents.ingestionStopped(ds1, s(0), n('c2')), // c3 owns shard 0: the late stop of a former owner
      ShardEvents.assignmentStarted(ds1, s(6), n('c1')), // only the singleton assigns
      ShardEvents.shardDown(ds1, s(6), n('c1')),
      ShardEvents.ingestionStarted('other' as never, s(0), n('c1')),
      ShardEvents.ingestionStarted(ds1, s(8), n('c1')), // shard == numShards: FiloDB crashes the singleton here
      ShardEvents.recoveryInProgress(ds1, s(6), n('c1'), 150),
    ];
    const reporters = ['c2', 'c1', 'c1', 'c1', 'c1', 'c1'];
    bad.forEach((e, i) => {
      const effects = h.report(reporters[i]!, e);
      expect(visible(effects).map((x) => x.type)).toEqual(['AckReport']);
      expect(noticesNamed(effects, 'report.rejected')).toHaveLength(1);
    });
    expect(h.mapper(ds1).version).toBe(version);
  });

  it('an event naming another node than its sender is refused', () => {
    const h = threeNodes();
    const effects = h.report('c1', ShardEvents.ingestionStarted(ds1, s(0), n('c3')));
    expect(noticesNamed(effects, 'report.rejected')[0]).toMatch(/names node c3/);
    expect(h.mapper(ds1).statusForShard(0).type).toBe('Assigned');
  });

  it('a Stopped shard does not loop: a repeated IngestionStopped publishes nothing and sends no map', () => {
    const h = threeNodes();
    h.run({ type: 'SubscribeAll', subscriber: sub });
    const first = h.report('c3', ShardEvents.ingestionStopped(ds1, s(0), n('c3')));
    expect(messagesTo(first, sub)).toHaveLength(1);
    const again = h.report('c3', ShardEvents.ingestionStopped(ds1, s(0), n('c3')));
    expect(visible(again).map((e) => e.type)).toEqual(['AckReport']);
    expect(h.mapper(ds1).statusForShard(0).type).toBe('Stopped');
    expect(h.mapper(ds1).nodeForShard(0)).toBe('c3');
  });

  it('events are stamped with epoch and consecutive versions', () => {
    const h = threeNodes();
    h.run({ type: 'SubscribeAll', subscriber: sub });
    const v = h.mapper(ds1).version;
    const effects = h.report('c3', ShardEvents.ingestionStarted(ds1, s(0), n('c3')), ShardEvents.ingestionStarted(ds1, s(1), n('c3')));
    expect(messagesTo(effects, sub).map((m) => m.type === 'StampedShardEvent' && [m.epoch, m.version])).toEqual([
      [1, v + 1],
      [1, v + 2],
    ]);
  });
});

describe('StartShards and StopShards refuse bad input with a typed reply and change nothing', () => {
  it('StartShards beyond the remaining capacity is refused exactly (FiloDB only refuses at zero)', () => {
    const h = threeNodes();
    expect(h.stopShards(ds1, [0, 1, 2])).toEqual({ type: 'Success' });
    const version = h.mapper(ds1).version;
    // c1 owns 2 of its cap of 3: one more fits, three do not.
    const refused = h.startShards(ds1, 'c1', [0, 1, 2]);
    expect(refused).toEqual({ type: 'BadSchema', message: 'Capacity exceeded. Cannot allocate 3 more shards to c1: its remaining capacity is 1' });
    expect(h.mapper(ds1).version).toBe(version);
    expect(h.startShards(ds1, 'c1', [0])).toEqual({ type: 'Success' });
    expect(h.shardsByNode(ds1).c1).toEqual([0, 6, 7]);
  });

  it('duplicates, negatives, shard == numShards and an empty list are invalid shard lists', () => {
    const h = threeNodes();
    for (const shards of [[1, 1], [-1], [8], []]) {
      expect(h.stopShards(ds1, shards)).toMatchObject({ type: 'BadSchema', message: expect.stringMatching(/^Invalid shards found/) });
    }
    expect(h.stopShards(ds1, [6])).toEqual({ type: 'Success' });
    expect(h.stopShards(ds1, [6])).toEqual({ type: 'BadSchema', message: 'Can not stop shards [6] not assigned to any node' });
  });

  it('stopped shards stay stopped through joins, departures and drains until StartShards places them (FiloDB re-places them at the next join)', () => {
    const h = threeNodes();
    h.stopShards(ds1, [0, 4]);
    h.run({ type: 'CheckCooldowns' });
    h.addMember('c4');
    for (const shard of [0, 4]) expect(h.mapper(ds1).statusForShard(shard).type).toBe('Stopped');
    expect(h.startShards(ds1, 'c4', [0])).toEqual({ type: 'Success' });
    expect(h.mapper(ds1).nodeForShard(0)).toBe('c4');
    h.removeMember('c2');
    h.run({ type: 'RemoveNode', node: 'c1', replyTo: adminReplyTo() });
    expect(h.mapper(ds1).nodeForShard(4)).toBeUndefined();
    expect(h.mapper(ds1).statusForShard(4).type).toBe('Stopped');
  });
});

describe('reassignment cooldowns', () => {
  it('are not bypassed by membership changes (FiloDB places the shard on the next join)', () => {
    const h = threeNodes();
    h.addMember('c4'); // a spare to move to
    h.report('c3', ShardEvents.ingestionError(ds1, s(0), n('c3'), 'poison record'));
    expect(h.mapper(ds1).nodeForShard(0)).toBe('c4');
    h.now += HOUR;
    h.report('c4', ShardEvents.ingestionError(ds1, s(0), n('c4'), 'poison record'));
    expect(h.mapper(ds1).nodeForShard(0)).toBeUndefined();
    h.addMember('c5');
    h.removeMember('c2');
    expect(h.mapper(ds1).nodeForShard(0)).toBeUndefined();
    expect(h.mapper(ds1).statusForShard(0).type).toBe('Error');
    // At the end of the cooldown (ms after 2 h) the check places it.
    h.now += HOUR;
    h.run({ type: 'CheckCooldowns' });
    expect(h.mapper(ds1).nodeForShard(0)).toBeUndefined();
    h.now += 1;
    h.run({ type: 'CheckCooldowns' });
    expect(h.mapper(ds1).nodeForShard(0)).toBeDefined();
    expect(noticesNamed(h.effects, 'shard.cooldown-ended')).toHaveLength(1);
  });

  it('a check that comes a moment before a cooldown ends asks again at its end', () => {
    const h = threeNodes({ reassignmentCooldownMs: 1000 });
    h.addMember('c4');
    h.report('c3', ShardEvents.ingestionError(ds1, s(0), n('c3'), 'bad'));
    h.report('c4', ShardEvents.ingestionError(ds1, s(0), n('c4'), 'bad'));
    const end = h.now + 1001; // the first ms after the cooldown
    // The singleton's timer fired 1 ms early by its clock (Node's timers and Date.now() drift apart).
    h.now = end - 1;
    h.run({ type: 'CheckCooldowns' });
    expect(h.mapper(ds1).nodeForShard(0)).toBeUndefined();
    expect(h.effects).toContainEqual({ type: 'ScheduleCheck', at: end });
    h.now = end;
    h.run({ type: 'CheckCooldowns' });
    expect(h.mapper(ds1).nodeForShard(0)).toBeDefined();
  });

  it('a check places only the shards whose cooldown ended, not other unassigned shards', () => {
    const h = threeNodes({ reassignmentCooldownMs: 1000 });
    h.addMember('c4');
    h.report('c3', ShardEvents.ingestionError(ds1, s(0), n('c3'), 'bad'));
    h.report('c4', ShardEvents.ingestionError(ds1, s(0), n('c4'), 'bad'));
    h.stopShards(ds1, [1]);
    h.now += 1001;
    h.run({ type: 'CheckCooldowns' });
    expect(h.mapper(ds1).nodeForShard(0)).toBeDefined();
    expect(h.mapper(ds1).nodeForShard(1)).toBeUndefined();
  });

  it('the cooldown is configurable', () => {
    const h = threeNodes({ reassignmentCooldownMs: 1000 });
    h.addMember('c4');
    h.report('c3', ShardEvents.ingestionError(ds1, s(0), n('c3'), 'bad'));
    expect(h.mapper(ds1).nodeForShard(0)).toBe('c4');
    h.now += 1001;
    h.report('c4', ShardEvents.ingestionError(ds1, s(0), n('c4'), 'bad'));
    expect(h.mapper(ds1).nodeForShard(0)).toBeDefined(); // moved again: the 1 s cooldown was over
    expect(() => new Harness({ reassignmentCooldownMs: -1 })).toThrow(/reassignmentCooldownMs/);
  });

  it('the reporting node is never the new owner; with no room elsewhere the shard is tried again after its cooldown', () => {
    // 8 shards over 4 nodes sized for 4: every node is full (2 of 2).
    const h = new Harness({ reassignmentCooldownMs: 1000 });
    for (const c of ['c1', 'c2', 'c3', 'c4']) h.addMember(c);
    h.setup(ds1, 8, 4);
    expect(h.shardsByNode(ds1).c4).toEqual([0, 1]);
    // No other node has room and the reporter is excluded: the shard stays in Error for a cooldown.
    const effects = h.report('c4', ShardEvents.ingestionError(ds1, s(0), n('c4'), 'bad'));
    expect(h.mapper(ds1).nodeForShard(0)).toBeUndefined();
    expect(effects.some((e) => e.type === 'PersistCooldown')).toBe(true);
    expect(effects).toContainEqual({ type: 'ScheduleCheck', at: h.now + 1001 });
    expect(noticesNamed(effects, 'shard.reassignment-skipped')[0]).toMatch(/no other node has room for it; it is tried again after its cooldown/);
    // Once it ended, the shard goes where there is room: back to c4 (a shard left unassigned for
    // good after one failure was the bug).
    h.now += 1001;
    h.run({ type: 'CheckCooldowns' });
    expect(h.mapper(ds1).nodeForShard(0)).toBe('c4');
  });

  it('the room a failed copy leaves goes at once to a shard waiting for room, never to the failed shard (sim seed 7905)', () => {
    // 8 shards sized for 2 nodes (4 each). c2 is drained: its shards move to c1, and all but 7 caught up.
    const h = new Harness({ reassignmentCooldownMs: 1000 });
    for (const c of ['c1', 'c2', 'c3']) h.addMember(c);
    h.setup(ds1, 8, 2);
    h.run({ type: 'RemoveNode', node: 'c2', replyTo: adminReplyTo() });
    for (const shard of [4, 5, 6]) h.report('c1', ShardEvents.ingestionStarted(ds1, s(shard), n('c1')));
    // c3 is lost: c1 is full (4, 5, 6 and 7's new copy), the drained c2 takes what it has room for, 3 waits.
    h.removeMember('c3');
    expect(h.mapper(ds1).unassignedShards()).toEqual([3]);
    // 7's new copy on c1 fails: the move is tried again after the cooldown, and c2 serves 7 meanwhile.
    const token = { epoch: h.state.epoch, version: h.mapper(ds1).assignmentVersion(7) };
    const effects = h.report('c1', ShardEvents.ingestionError(ds1, s(7), n('c1'), 'bad', token));
    expect(h.mapper(ds1).nodesForShard(7)).toEqual(['c2']);
    // c1 has room again: 3 goes there now, not at the next change of the members.
    expect(h.mapper(ds1).nodeForShard(3)).toBe('c1');
    expect(h.mapper(ds1).unassignedShards()).toEqual([]);
    expect(noticesNamed(effects, 'shard.reassignment-skipped')[0]).toMatch(/while moving there from c2/);
  });
});

describe('membership', () => {
  it('maps say which members they were made for: the changes a join makes carry the members version that lists the joiner', () => {
    const h = threeNodes();
    h.setup(ds1, 8, 2);
    const effects = h.restartMember('c3');
    const joined = effects.find((e) => e.type === 'PublishMembersChange' || e.type === 'PublishMembers');
    const changes = effects.filter((e) => e.type === 'PublishChanges' || e.type === 'PublishSnapshot');
    if (!joined) throw new Error('no members published after the restart');
    expect(changes.length).toBeGreaterThan(0);
    for (const c of changes) expect(c.members).toBe(joined.version);
    // A whole map asked for later is made for the members of then.
    const sync = h.run({ type: 'SyncMaps', subscriber: subscriberId('c1:guardian'), datasets: [ds1], members: false });
    expect(sync.find((e) => e.type === 'PublishSnapshot')?.members).toBe(joined.version);
  });

  it('a restarted node (new incarnation) loses its shards, which are placed again newest first', () => {
    const h = threeNodes();
    h.addMember('c4');
    h.restartMember('c3');
    expect(h.memberOrder()).toEqual(['c1', 'c2', 'c4', 'c3']);
    // c4 (the spare) takes c3's old shards while c3 is out; c3 then joins as the new spare.
    expect(h.shardsByNode(ds1)).toEqual({ c1: [6, 7], c2: [3, 4, 5], c4: [0, 1, 2], c3: [] });
    const stale = h.run({ type: 'NodeReport', node: n('c3'), incarnation: incarnation('c3#1'), seq: 9, events: [] });
    expect(noticesNamed(stale, 'report.rejected')).toHaveLength(1);
  });

  it('a departure of an unknown node or an old incarnation is ignored', () => {
    const h = threeNodes();
    const version = h.mapper(ds1).version;
    h.run({ type: 'MemberDown', node: n('c3'), incarnation: incarnation('c3#0') });
    h.run({ type: 'MemberDown', node: n('zz'), incarnation: incarnation('zz#1') });
    expect(h.mapper(ds1).version).toBe(version);
    expect(noticesNamed(h.effects, 'member.ignored')).toHaveLength(1);
  });

  it('a membership view is applied as departures, then joins in join order', () => {
    const h = threeNodes();
    const c1 = h.state.members[0]!;
    const c2 = h.state.members[1]!;
    h.run({ type: 'MembershipView', members: [{ node: nodeId('c9'), incarnation: incarnation('c9#1'), joinedAt: 100 }, c2, c1] });
    expect(h.memberOrder()).toEqual(['c1', 'c2', 'c9']);
    // c3's shards went down first: c1 topped up with 0, then the newcomer c9 took 1 and 2.
    expect(h.shardsByNode(ds1)).toEqual({ c1: [0, 6, 7], c2: [3, 4, 5], c9: [1, 2] });
  });
});

describe('datasets', () => {
  it('SetupDataset with the same config answers DatasetExists; with another, DatasetConflict naming the fields', () => {
    const h = threeNodes();
    expect(h.setup(ds1, 8, 3)).toEqual({ type: 'DatasetExists', dataset: ds1 });
    expect(h.setup(ds1, 16, 2)).toEqual({
      type: 'DatasetConflict',
      dataset: ds1,
      fields: ['numShards', 'minNumNodes'],
      message: 'dataset ds1 already exists with a different numShards, minNumNodes',
    });
    expect(h.mapper(ds1).numShards).toBe(8);
  });

  it('a dataset removed and set up again under one epoch continues its versions: a follower that missed the removal takes the new map', () => {
    const h = threeNodes();
    h.run({ type: 'SubscribeAll', subscriber: sub });
    const follower = new ShardMapFollower(ds1);
    const old = h.mapper(ds1).toSnapshot(h.state.epoch);
    expect(follower.applySnapshot(old)).not.toBe('stale');
    h.run({ type: 'RemoveDataset', dataset: ds1, replyTo: adminReplyTo() }); // the follower never hears of it
    const effects = h.run({ type: 'SetupDataset', config: config(ds1, 8, 3), replyTo: adminReplyTo() });
    const fresh = messagesTo(effects, sub).find((m) => m.type === 'CurrentShardSnapshot');
    expect(fresh?.type === 'CurrentShardSnapshot' && fresh.snapshot.version).toBeGreaterThan(old.version);
    expect(fresh?.type === 'CurrentShardSnapshot' && follower.applySnapshot(fresh.snapshot)).not.toBe('stale');
    expect(follower.version).toBe(h.mapper(ds1).version);
  });

  it('a new dataset is persisted before anyone hears of it, and the reply comes last', () => {
    const h = new Harness();
    h.addMember('c1');
    h.run({ type: 'SubscribeAll', subscriber: sub });
    const effects = h.run({ type: 'SetupDataset', config: config(ds1, 4, 1), replyTo: adminReplyTo() });
    expect(effects.filter((e) => e.type !== 'Notice').map((e) => e.type)).toEqual([
      'PersistDataset',
      'PersistShardMap',
      'PersistSubscriptions', // the watcher is now subscribed to the new dataset
      'PersistAppliedRequests', // after what the request changed, before anyone hears of it
      'Publish', // subscriptions to the watchers
      'PublishSnapshot', // the new map, to every node and subscriber
      'Reply',
    ]);
  });

  it('GetShardMap and ListRegisteredDatasets answer from the current state', () => {
    const h = threeNodes();
    const map = replyOf(h.run({ type: 'GetShardMap', dataset: ds1, replyTo: replyTo('r') }));
    expect(map?.type === 'CurrentShardSnapshot' && map.snapshot.version).toBe(h.mapper(ds1).version);
    expect(replyOf(h.run({ type: 'GetShardMap', dataset: 'x' as never, replyTo: replyTo('r') }))).toEqual({ type: 'DatasetUnknown', dataset: 'x' });
    expect(replyOf(h.run({ type: 'ListRegisteredDatasets', replyTo: replyTo('r') }))).toEqual({ type: 'RegisteredDatasets', datasets: [ds1] });
  });

  it("the periodic digest is one small record of every map's stamp and the members' version, and persists nothing", () => {
    const h = threeNodes();
    h.run({ type: 'SubscribeAll', subscriber: sub });
    const router = subscriberId('router');
    h.run({ type: 'Subscribe', subscriber: router, dataset: ds1 });
    const effects = h.run({ type: 'PublishDigest' });
    expect(visible(effects)).toEqual([
      { type: 'PublishDigest', maps: [{ dataset: ds1, numShards: 8, epoch: 1, version: h.mapper(ds1).version }], members: h.state.membersVersion },
    ]);
    expect(h.state.membersVersion).toBeGreaterThan(0);
    expect(messagesTo(effects, sub)).toEqual([]);
    expect(mapsPublished(effects)).toEqual([]);
  });
});
