// A large setup is placed over several decisions (`copiesPerDecision`), so that no single decision
// holds the singleton's event loop for long (issue 34: a 65 536 × 3 setup was one 250–400 ms task).
// Each decision places at most that many new copies and asks for the next check at once; the last
// one leaves the same kind of map a setup in one decision leaves: every copy placed, racks apart,
// nodes even.
import { describe, expect, it } from 'vitest';
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import type { Effect } from '../../src/core/shard-manager/protocol.js';
import type { ShardMapper } from '../../src/core/shard-mapper.js';
import { adminReplyTo, ds1, Harness, noticesNamed, replyOf } from '../support/manager-harness.js';

function config(extra: Record<string, unknown>): DatasetConfig {
  const r = validateDatasetConfig({ ref: ds1, minNumNodes: 1, source: { type: 'synthetic' }, ...extra });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

/** Copies in a map (every assignment of every shard). */
const copiesIn = (m: ShardMapper): number => Array.from({ length: m.numShards }, (_, s) => m.recordForShard(s).assignments.length).reduce((a, b) => a + b, 0);

/** A check asked for at the decision's own time: the rest of the placement, after a turn. */
const continuesNow = (effects: readonly Effect[], now: number): boolean => effects.some((e) => e.type === 'ScheduleCheck' && e.at <= now);

/**
 * Runs the setup and then every check it asks for (`between` runs before each); returns the copies
 * each decision added. Every decision but the last says that the rest follows.
 */
function setUpInParts(h: Harness, cfg: DatasetConfig, between: (part: number) => void = () => {}): number[] {
  const added: number[] = [];
  let effects = h.run({ type: 'SetupDataset', config: cfg, replyTo: adminReplyTo() });
  expect(replyOf(effects)?.type).toBe('DatasetVerified');
  added.push(copiesIn(h.mapper(ds1)));
  while (continuesNow(effects, h.now)) {
    expect(noticesNamed(effects, 'round.continued')).toHaveLength(1);
    expect(added.length).toBeLessThan(100);
    between(added.length);
    const before = copiesIn(h.mapper(ds1));
    effects = h.run({ type: 'CheckCooldowns' });
    added.push(copiesIn(h.mapper(ds1)) - before);
  }
  expect(noticesNamed(effects, 'round.continued')).toHaveLength(0);
  return added;
}

const RACKS: Record<string, string> = { a1: 'A', a2: 'A', b1: 'B', b2: 'B', c1: 'C', c2: 'C' };

function sixNodesInThreeRacks(copiesPerDecision: number): Harness {
  const h = new Harness({ copiesPerDecision, settleWindowMs: 0 });
  for (const [node, rack] of Object.entries(RACKS)) h.run({ type: 'MemberUp', member: { ...h.memberFor(node), rack } });
  return h;
}

describe('a setup larger than one decision places', () => {
  it('a balanced dataset over several decisions, none placing more than copiesPerDecision, ending balanced with racks apart', () => {
    const h = sixNodesInThreeRacks(10);
    const added = setUpInParts(h, config({ numShards: 16, replicationFactor: 3, strategy: 'balanced' }));
    expect(added).toEqual([10, 10, 10, 10, 8]);
    const m = h.mapper(ds1);
    for (let s = 0; s < 16; s++) expect(new Set(m.nodesForShard(s).map((n) => RACKS[n])).size).toBe(3);
    expect(Object.keys(RACKS).map((n) => m.numShardsForNode(n as never))).toEqual([8, 8, 8, 8, 8, 8]);
  });

  it('the rest on the members left when one is lost between the parts, and answers meanwhile with the map as it stands', () => {
    const h = sixNodesInThreeRacks(10);
    let answered = 0;
    setUpInParts(h, config({ numShards: 16, replicationFactor: 3, strategy: 'balanced' }), (part) => {
      const reply = replyOf(h.run({ type: 'GetShardMap', dataset: ds1, replyTo: adminReplyTo() }));
      expect(reply?.type === 'CurrentShardSnapshot' && reply.snapshot.shards.reduce((n, r) => n + r.assignments.length, 0)).toBe(copiesIn(h.mapper(ds1)));
      answered++;
      if (part === 2) h.removeMember('c2');
    });
    expect(answered).toBeGreaterThan(2);
    const m = h.mapper(ds1);
    expect(copiesIn(m)).toBe(48);
    expect(m.numShardsForNode('c2' as never)).toBe(0);
    for (let s = 0; s < 16; s++) expect(new Set(m.nodesForShard(s).map((n) => RACKS[n])).size).toBe(3);
  });

  it('a filodb-default dataset the same way, every shard assigned at the end', () => {
    const h = new Harness({ copiesPerDecision: 7 });
    for (const n of ['n1', 'n2']) h.addMember(n);
    const added = setUpInParts(h, config({ numShards: 32, minNumNodes: 2 }));
    expect(added).toEqual([7, 7, 7, 7, 4]);
    const m = h.mapper(ds1);
    expect(m.numUnassignedShards).toBe(0);
    expect([m.numShardsForNode('n1' as never), m.numShardsForNode('n2' as never)]).toEqual([16, 16]);
  });

  it('in one decision when it fits (the default room is 16 384 copies)', () => {
    const h = new Harness();
    for (const n of ['n1', 'n2']) h.addMember(n);
    expect(setUpInParts(h, config({ numShards: 4096, minNumNodes: 2 }))).toEqual([4096]);
  });

  it('refuses a room that is not a positive whole number of copies', () => {
    expect(() => new Harness({ copiesPerDecision: 0 })).toThrow(/copiesPerDecision must be a positive integer/);
    expect(() => new Harness({ copiesPerDecision: 2.5 })).toThrow(RangeError);
  });
});
