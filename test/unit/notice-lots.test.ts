// A decision about many shards says each kind of notice once (src/core/shard-manager/notice-lots.ts):
// a 65 536 × 3 setup added 131 072 copies in one decision, a notice (and a log line) per copy.
import { describe, expect, it } from 'vitest';
import type { DatasetRef, NodeId } from '../../src/core/ids.js';
import { NoticeLots, NOTICES_APART_UP_TO } from '../../src/core/shard-manager/notice-lots.js';
import type { Effect, Notice } from '../../src/core/shard-manager/protocol.js';
import { validateDatasetConfig } from '../../src/core/dataset-config.js';
import { Harness } from '../support/manager-harness.js';

const started = (dataset: string, shard: number): Notice => ({
  name: 'shard.handoff-started',
  level: 'info',
  dataset: dataset as DatasetRef,
  shard,
  node: 'a' as NodeId,
  message: `${dataset}/${shard} moves`,
});
/** The notices a decision that noticed `notices` says. */
function lotOfNotices(notices: readonly Notice[]): Effect[] {
  const lots = new NoticeLots();
  for (const n of notices) lots.add(n);
  return lots.effects();
}
const noticesOf = (effects: readonly Effect[]) => effects.flatMap((e) => (e.type === 'Notice' ? [e.notice] : []));

describe('notices of one decision', () => {
  it('keeps up to the limit of one kind apart, in order', () => {
    const few = Array.from({ length: NOTICES_APART_UP_TO }, (_, s) => started('m', s));
    expect(noticesOf(lotOfNotices(few))).toEqual(few);
  });

  it('makes one notice of a kind past the limit, where its first was, with the exact count and a sample', () => {
    const created: Notice = { name: 'dataset.created', level: 'info', dataset: 'm' as DatasetRef, message: 'm created' };
    const many = Array.from({ length: 5000 }, (_, s) => started('m', s));
    const other = started('n', 7); // another dataset's: apart
    const out = noticesOf(lotOfNotices([created, ...many.slice(0, 10), other, ...many.slice(10)]));
    expect(out.map((n) => n.name)).toEqual(['dataset.created', 'shard.handoff-started', 'shard.handoff-started']);
    expect(out[1]).toMatchObject({ dataset: 'm', shard: 0, lot: { count: 5000, sample: ['m/0 moves', 'm/1 moves', 'm/2 moves'] } });
    expect(out[1]!.message).toBe('m: shard.handoff-started × 5000 in one decision; the first: m/0 moves');
    expect(out[2]).toEqual(other);
  });

  it('a 65 536-shard setup of three copies says its added copies in one notice, and counts them all', () => {
    const h = new Harness();
    for (const c of ['c1', 'c2', 'c3']) h.addMember(c);
    const cfg = validateDatasetConfig({
      ref: 'big',
      numShards: 65_536,
      minNumNodes: 1,
      replicationFactor: 3,
      strategy: 'balanced',
      source: { type: 'synthetic' },
    });
    if (!cfg.ok) throw new Error(cfg.error.message);
    const effects = h.run({ type: 'SetupDataset', config: cfg.value, replyTo: 'admin-x' as never });
    const notices = noticesOf(effects);
    expect(notices.length).toBeLessThan(5);
    expect(notices.find((n) => n.name === 'shard.replica-added')?.lot?.count).toBe(2 * 65_536);
  });
});
