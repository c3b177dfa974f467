// FiloDB's ReassignShardsSpec (reference §7.4): operators stop and start shards by hand.
// ds1 has 8 shards and minNumNodes 3; `sub` is a watcher.
import { describe, expect, it } from 'vitest';
import { adminReplyTo, mapsPublished, membersChange, ds1, ds2, Harness, messagesTo, sub, visible } from '../support/manager-harness.js';

const owners = (h: Harness) => Array.from({ length: 8 }, (_, s) => h.mapper(ds1).nodeForShard(s));
const statuses = (h: Harness) => Array.from({ length: 8 }, (_, s) => h.mapper(ds1).statusForShard(s).type);

describe('ReassignShardsSpec (FiloDB reference §7.4), sequential', () => {
  const h = new Harness();

  it('1. before any dataset: StartShards names the unknown dataset first, even with a bogus node', () => {
    h.run({ type: 'SubscribeAll', subscriber: sub });
    expect(visible(h.addMember('c3')).map((e) => e.type)).toEqual(['PublishMembersChange']);
    expect(visible(h.addMember('c4')).map((e) => e.type)).toEqual(['PublishMembersChange']);
    expect(h.startShards(ds1, 'c1', [0, 1])).toEqual({ type: 'DatasetUnknown', dataset: ds1 });
    expect(h.startShards(ds2, 'not a node!', [0])).toEqual({ type: 'DatasetUnknown', dataset: ds2 });
  });

  it('2. ds1 over [c3, c4]: c4 = [0,1,2], c3 = [3,4,5]; starting a shard owned elsewhere, or on a non-member, is refused', () => {
    expect(h.setup(ds1, 8, 3)).toEqual({ type: 'DatasetVerified', dataset: ds1 });
    expect(h.shardsByNode(ds1)).toEqual({ c3: [3, 4, 5], c4: [0, 1, 2] });
    expect(mapsPublished(h.effects)).toEqual([ds1]);
    expect(messagesTo(h.effects, sub).map((m) => m.type)).toEqual(['ShardSubscriptions', 'CurrentShardSnapshot']);

    const refused = h.startShards(ds1, 'c4', [5]);
    expect(refused).toMatchObject({ type: 'BadSchema' });
    expect(refused?.type === 'BadSchema' && refused.message).toMatch(/^Can not start/);
    // Nothing changed but the record that this request was answered (a replay is refused again).
    expect(visible(h.effects).filter((e) => e.type !== 'Reply' && e.type !== 'PersistAppliedRequests')).toEqual([]);
    expect(h.startShards(ds1, 'c2', [0])).toEqual({ type: 'BadData', message: 'c2 not found' });
    expect(messagesTo(h.effects, sub)).toEqual([]);
  });

  it('3. an unknown node is not found; a malformed node id is refused as malformed, without a crash', () => {
    expect(h.startShards(ds1, 'nosuchnode', [0])).toEqual({ type: 'BadData', message: 'nosuchnode not found' });
    const malformed = h.startShards(ds1, 'akka.tcp://sys@host:2552', [0]);
    expect(malformed?.type === 'BadData' && malformed.message).toMatch(/malformed node id/);
  });

  it('4. c2 joins and takes [6,7]; stop 5 then start it on c2', () => {
    h.addMember('c2');
    expect(mapsPublished(h.effects)).toEqual([ds1]);
    expect(owners(h)).toEqual(['c4', 'c4', 'c4', 'c3', 'c3', 'c3', 'c2', 'c2']);
    expect(statuses(h).every((s) => s === 'Assigned')).toBe(true);

    expect(h.stopShards(ds1, [5])).toEqual({ type: 'Success' });
    expect(h.shardsByNode(ds1).c3).toEqual([3, 4]);
    expect(mapsPublished(h.effects)).toEqual([ds1]);
    expect(h.startShards(ds1, 'c2', [5])).toEqual({ type: 'Success' });
    expect(h.shardsByNode(ds1).c2).toEqual([5, 6, 7]);
  });

  it('5. c1 joins as a spare: no change of the map (the members are published), owners unchanged', () => {
    expect(visible(h.addMember('c1')).map((e) => e.type)).toEqual(['PublishMembersChange']);
    expect(owners(h)).toEqual(['c4', 'c4', 'c4', 'c3', 'c3', 'c2', 'c2', 'c2']);
  });

  it('6-9. refusals: unknown dataset, invalid shard, same node, owned by another node', () => {
    expect(h.startShards(ds2, 'c1', [0, 1])).toEqual({ type: 'DatasetUnknown', dataset: ds2 });
    expect(h.startShards(ds1, 'c1', [8])).toEqual({ type: 'BadSchema', message: 'Invalid shards found [8]. Valid shards are []' });
    const same = h.startShards(ds1, 'c4', [0]);
    expect(same?.type === 'BadSchema' && same.message).toMatch(/^Can not reassign shards to same node/);
    const other = h.startShards(ds1, 'c4', [4]);
    expect(other?.type === 'BadSchema' && other.message).toMatch(/^Can not start \[4\]/);
  });

  it('10. stop and start, one shard at a time; every step tells all four nodes once', () => {
    const steps: [() => unknown, Record<string, number[]>][] = [
      [() => h.stopShards(ds1, [2]), { c4: [0, 1] }],
      [() => h.startShards(ds1, 'c1', [2]), { c1: [2] }],
      [() => h.stopShards(ds1, [1]), { c4: [0] }],
      [() => h.startShards(ds1, 'c3', [1]), { c3: [1, 3, 4] }],
    ];
    for (const [act, expected] of steps) {
      expect(act()).toEqual({ type: 'Success' });
      expect(h.shardsByNode(ds1)).toMatchObject(expected);
      expect(mapsPublished(h.effects)).toEqual([ds1]);
      expect(messagesTo(h.effects, sub).length).toBeGreaterThan(0);
    }
  });

  it('11. stop [0,7], then start both on c1', () => {
    expect(h.stopShards(ds1, [0, 7])).toEqual({ type: 'Success' });
    expect(h.shardsByNode(ds1)).toMatchObject({ c4: [], c2: [5, 6] });
    expect(h.startShards(ds1, 'c1', [0, 7])).toEqual({ type: 'Success' });
    expect(h.shardsByNode(ds1).c1).toEqual([0, 2, 7]);
  });

  it('12. c3 leaves: its shards go newest first; c3 is then not found; shard 2 moves from c1 to c4', () => {
    h.removeMember('c3');
    expect(h.memberOrder()).toEqual(['c4', 'c2', 'c1']);
    expect(h.shardsByNode(ds1)).toEqual({ c4: [3, 4], c2: [1, 5, 6], c1: [0, 2, 7] });
    expect(membersChange(h.effects)).toEqual({ joined: [], left: ['c3'] }); // no longer one of the incarnations maps are made for
    expect(h.startShards(ds1, 'c3', [0])).toEqual({ type: 'BadData', message: 'c3 not found' });
    expect(h.stopShards(ds1, [2])).toEqual({ type: 'Success' });
    expect(h.shardsByNode(ds1).c1).toEqual([0, 7]);
    expect(h.startShards(ds1, 'c4', [2])).toEqual({ type: 'Success' });
    expect(h.shardsByNode(ds1).c4).toEqual([2, 3, 4]);
  });

  it('13. RemoveDataset: every node is told nothing is assigned; the dataset is then unknown', () => {
    const effects = h.run({ type: 'RemoveDataset', dataset: ds1, replyTo: adminReplyTo() });
    expect(mapsPublished(effects)).toEqual([ds1]);
    expect(h.stopShards(ds1, [0])).toEqual({ type: 'DatasetUnknown', dataset: ds1 });
  });

  it('14. ds1 again over [c4, c2, c1]: c1 = [0,1,2], c2 = [3,4,5], c4 = [6,7]; then 5 moves to c4', () => {
    h.setup(ds1, 8, 3);
    expect(h.shardsByNode(ds1)).toEqual({ c1: [0, 1, 2], c2: [3, 4, 5], c4: [6, 7] });
    expect(h.stopShards(ds1, [5])).toEqual({ type: 'Success' });
    expect(h.shardsByNode(ds1).c2).toEqual([3, 4]);
    expect(h.startShards(ds1, 'c4', [5])).toEqual({ type: 'Success' });
    expect(owners(h)).toEqual(['c1', 'c1', 'c1', 'c2', 'c2', 'c4', 'c4', 'c4']);
    expect(statuses(h).every((s) => s === 'Assigned')).toBe(true);
  });
});
