// The checkpoints of the shards a node starts together are read together: thousands of shards
// must not be thousands of MetaStore requests at once.
import { describe, expect, it } from 'vitest';
import { CheckpointLoader, CHECKPOINTS_PER_READ } from '../../src/actors/checkpoint-loader.js';
import { datasetRef, nodeId, type DatasetRef } from '../../src/core/ids.js';

const a = datasetRef('a');
const b = datasetRef('b');
const node = nodeId('n1');

function fakeStore(fail = false) {
  const calls: { dataset: DatasetRef; shards: readonly number[] }[] = [];
  return {
    calls,
    async readCheckpointsOf(dataset: DatasetRef, shards: readonly number[]) {
      calls.push({ dataset, shards });
      if (fail) throw new Error('store away');
      return new Map(shards.filter((s) => s % 2 === 0).map((s) => [s, { copies: new Map([[node, new Map([['0', s * 10]])]]), shared: new Map() }] as const));
    },
  };
}

describe('CheckpointLoader', () => {
  it('reads the shards asked for in one turn in batches per dataset, and gives each shard its own checkpoints', async () => {
    const store = fakeStore();
    const loader = new CheckpointLoader(store);
    const shards = Array.from({ length: 2_500 }, (_, i) => i);
    const results = await Promise.all([...shards.map((s) => loader.read(a, s)), loader.read(b, 7), loader.read(b, 8)]);
    expect(store.calls.map((c) => [c.dataset, c.shards.length])).toEqual([
      [a, CHECKPOINTS_PER_READ],
      [a, CHECKPOINTS_PER_READ],
      [a, 500],
      [b, 2],
    ]);
    expect(results[4]!.copies.get(node)?.get('0')).toBe(40);
    expect(results[5]!.copies.size).toBe(0); // no checkpoint
    expect(results[2_501]!.copies.get(node)?.get('0')).toBe(80);
    // A later turn is a new batch.
    await loader.read(a, 3);
    expect(store.calls).toHaveLength(5);
  });

  it('a failed read fails every shard of its batch (each caller retries)', async () => {
    const loader = new CheckpointLoader(fakeStore(true));
    const outcomes = await Promise.allSettled([loader.read(a, 1), loader.read(a, 2)]);
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected']);
  });
});
