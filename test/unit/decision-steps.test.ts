// A decision can be made in steps (`ShardManager.decideInSteps`): the singleton's runtime gives its
// event loop a turn at each, so a large round does not hold it (issue 34: a join wave's round at
// 65 536 × 3 held it for 100–250 ms, a setup's for 250–400 ms). The steps must come often through a
// large round, and the decision they end in must be the one `decide` makes.
import { describe, expect, it } from 'vitest';
import { validateDatasetConfig } from '../../src/core/dataset-config.js';
import type { ShardManagerInput } from '../../src/core/shard-manager/protocol.js';
import { adminReplyTo, ds1, Harness, replyOf } from '../support/manager-harness.js';

const SHARDS = 16_384;

/** Runs `input` in steps; the steps it took and the decision it ended in. */
function inSteps(h: Harness, input: ShardManagerInput) {
  const steps = h.manager.decideInSteps(h.state, input, h.now);
  let yields = 0;
  let next = steps.next();
  for (; !next.done; next = steps.next()) yields++;
  return { yields, decision: next.value };
}

/** The same decision both ways: the effects, and the map. */
function expectSameDecision(h: Harness, input: ShardManagerInput) {
  const stepped = inSteps(h, input);
  const whole = h.manager.decide(h.state, input, h.now);
  expect(stepped.decision.effects).toEqual(whole.effects);
  expect(stepped.decision.state.datasets.get(ds1)!.mapper.equals(whole.state.datasets.get(ds1)!.mapper)).toBe(true);
  h.state = whole.state;
  return { yields: stepped.yields, effects: whole.effects };
}

describe('a large decision in steps', () => {
  it('yields at least once per 4096 shards through a setup and a join round, and decides what decide decides', () => {
    const h = new Harness({ settleWindowMs: 0 });
    for (const [node, rack] of [
      ['a1', 'A'],
      ['b1', 'B'],
      ['c1', 'C'],
    ] as const)
      h.run({ type: 'MemberUp', member: { ...h.memberFor(node), rack } });
    const config = validateDatasetConfig({
      ref: ds1,
      numShards: SHARDS,
      minNumNodes: 1,
      replicationFactor: 3,
      strategy: 'balanced',
      source: { type: 'synthetic' },
    });
    if (!config.ok) throw new Error(config.error.message);

    const setup = expectSameDecision(h, { type: 'SetupDataset', config: config.value, replyTo: adminReplyTo() });
    expect(replyOf(setup.effects)?.type).toBe('DatasetVerified');
    expect(setup.yields).toBeGreaterThanOrEqual(SHARDS / 4096);
    expect(h.mapper(ds1).numShardsForNode('a1' as never)).toBe(SHARDS);

    const join = expectSameDecision(h, { type: 'MemberUp', member: { ...h.memberFor('a2'), rack: 'A' } });
    expect(join.yields).toBeGreaterThanOrEqual(SHARDS / 4096);
    // The round planned the join (half of rack A's copies to the new node) and started 16 moves.
    expect(h.mapper(ds1).numShardsForNode('a2' as never)).toBe(16);
  });

  it('yields nothing for a decision with no round', () => {
    const h = new Harness();
    h.addMember('n1');
    expect(inSteps(h, { type: 'PublishDigest' }).yields).toBe(0);
  });
});
