// The log line of a shard held by its cooldown says when the cooldown ends in a form people read
// (ISO 8601, UTC) beside the raw milliseconds scripts compare.
import { describe, expect, it } from 'vitest';
import { nodeId, type ShardNum } from '../../src/core/ids.js';
import { isoInstant } from '../../src/core/instant.js';
import { ShardEvents } from '../../src/core/status.js';
import { ds1, HOUR, Harness, noticesNamed } from '../support/manager-harness.js';

describe('a shard that fails again inside its cooldown', () => {
  it("is logged with the cooldown's end as an ISO time and as epoch milliseconds", () => {
    const h = new Harness({ reassignmentCooldownMs: 2 * HOUR });
    h.now = Date.UTC(2026, 10, 27, 9, 30); // 2026-11-27T09:30:00Z
    for (const n of ['n1', 'n2', 'n3']) h.addMember(n);
    h.setup(ds1, 4, 2);
    const shard = 0 as ShardNum;
    const first = h.mapper(ds1).nodeForShard(shard)!;
    h.report(first, ShardEvents.ingestionError(ds1, shard, nodeId(first), 'poison record'));
    const second = h.mapper(ds1).nodeForShard(shard)!;
    expect(second).not.toBe(first);
    h.now += 10 * 60 * 1000;
    h.report(second, ShardEvents.ingestionError(ds1, shard, nodeId(second), 'poison record'));
    // Two hours after the first failure (the ms past the minute are the cooldown's own boundary).
    const m = /until its cooldown ends at (2026-11-27T11:30:00\.\d{3}Z) \((\d+)\)$/.exec(noticesNamed(h.effects, 'shard.reassignment-skipped')[0] ?? '');
    expect(m, 'the notice names the end both ways').not.toBeNull();
    expect(new Date(Number(m![2])).toISOString()).toBe(m![1]);
  });

  it("formats any number: out of Date's range it is shown as it is", () => {
    expect(isoInstant(0)).toBe('1970-01-01T00:00:00.000Z');
    expect(isoInstant(Number.MAX_SAFE_INTEGER)).toBe(String(Number.MAX_SAFE_INTEGER));
    expect(isoInstant(Number.NaN)).toBe('NaN');
  });
});
