// An error report names the assignment (fencing token) of the copy that failed. The singleton moves
// the shard on it only if the copy still has that assignment: a report of a former assignment,
// delivered late or replayed to the next singleton, must not take the shard from a node that now
// runs it under a newer one (issue: a recovering singleton restarted the failed copy, then the old
// report moved the shard away while the node wrote: two writers of an RF-1 shard).
import { describe, expect, it } from 'vitest';
import { nodeId, type ShardNum } from '../../src/core/ids.js';
import { ShardEvents } from '../../src/core/status.js';
import { ds1, Harness, noticesNamed } from '../support/manager-harness.js';

function started(nodes = ['n1', 'n2', 'n3']) {
  const h = new Harness();
  for (const n of nodes) h.addMember(n);
  h.setup(ds1, 4, 2);
  const shard = 1 as ShardNum;
  const owner = h.mapper(ds1).nodeForShard(shard)!;
  h.report(owner, ShardEvents.ingestionStarted(ds1, shard, nodeId(owner)));
  const token = { epoch: h.state.epoch, version: h.mapper(ds1).assignmentVersion(shard) };
  return { h, shard, owner, token };
}

describe('an IngestionError report and the assignment it names', () => {
  it("moves the shard when it names the copy's current assignment", () => {
    const { h, shard, owner, token } = started();
    h.report(owner, ShardEvents.ingestionError(ds1, shard, nodeId(owner), 'the sink failed', token));
    expect(h.mapper(ds1).nodeForShard(shard)).not.toBe(owner);
    expect(noticesNamed(h.effects, 'shard.reassigned')).toHaveLength(1);
  });

  it('is ignored when it names an older epoch: the copy stays where it runs', () => {
    const { h, shard, owner, token } = started();
    h.report(owner, ShardEvents.ingestionError(ds1, shard, nodeId(owner), 'the sink failed', { epoch: token.epoch - 1, version: token.version + 5 }));
    expect(h.mapper(ds1).nodeForShard(shard)).toBe(owner);
    expect(h.mapper(ds1).statusForShard(shard).type).toBe('Active');
    expect(noticesNamed(h.effects, 'shard.reassigned')).toHaveLength(0);
    expect(noticesNamed(h.effects, 'report.rejected').join('\n')).toMatch(
      /ignored: it reports a failure under assignment .* and the copy has had assignment .* since/,
    );
  });

  it('is ignored when the shard left the node and came back since (an older assignment version)', () => {
    const { h, shard, owner, token } = started();
    // An operator stops the shard and starts it on the same node again: a new assignment there.
    h.stopShards(ds1, [shard]);
    h.startShards(ds1, owner, [shard]);
    expect(h.mapper(ds1).nodeForShard(shard)).toBe(owner);
    expect(h.mapper(ds1).assignmentVersion(shard)).toBeGreaterThan(token.version);
    // A failure of the first assignment reported only now (a resend the singleton had not acknowledged).
    h.report(owner, ShardEvents.ingestionError(ds1, shard, nodeId(owner), 'first failure', token));
    expect(h.mapper(ds1).nodeForShard(shard)).toBe(owner);
    expect(noticesNamed(h.effects, 'report.rejected')).toHaveLength(1);
    expect(noticesNamed(h.effects, 'shard.reassigned')).toHaveLength(0);
  });

  it('without a token (a node of an older version) acts as before', () => {
    const { h, shard, owner } = started();
    h.report(owner, ShardEvents.ingestionError(ds1, shard, nodeId(owner), 'the sink failed'));
    expect(h.mapper(ds1).nodeForShard(shard)).not.toBe(owner);
  });
});
