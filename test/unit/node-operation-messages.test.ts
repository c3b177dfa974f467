// The counts in what an operator reads after a drain or a replacement (the CLI prints the reply's
// message): one copy is "1 copy", not "1 copies".
import { describe, expect, it } from 'vitest';
import { validateDatasetConfig } from '../../src/core/dataset-config.js';
import { incarnation, nodeId } from '../../src/core/ids.js';
import { adminReplyTo, ds1, Harness, replyOf } from '../support/manager-harness.js';

function clusterWithOneCopyOn(victim: string): Harness {
  const h = new Harness();
  let joinedAt = 0;
  for (const name of ['n1', 'n2', 'n3'])
    h.run({ type: 'MemberUp', member: { node: nodeId(name), incarnation: incarnation(`${name}#1`), joinedAt: ++joinedAt } });
  const config = validateDatasetConfig({ ref: ds1, numShards: 2, minNumNodes: 2, source: { type: 'synthetic' } });
  if (!config.ok) throw new Error(config.error.message);
  h.run({ type: 'SetupDataset', config: config.value, replyTo: adminReplyTo() });
  // FiloDB's strategy asks the newest first: n3 and n2 take one shard each, n1 none.
  expect(h.mapper(ds1).shardsForNode(nodeId(victim))).toHaveLength(1);
  return h;
}

describe('node operation replies', () => {
  it('say "1 copy" for a drain of a node with one copy', () => {
    const h = clusterWithOneCopyOn('n3');
    const reply = replyOf(h.run({ type: 'RemoveNode', node: 'n3', replyTo: adminReplyTo() }));
    expect(reply).toMatchObject({
      type: 'NodeOperationAccepted',
      moves: 1,
      message: 'n3 is being drained: 1 copy to hand off; it will be told when it may stop',
    });
  });

  it('say "1 copy" for a replacement of a node with one copy, and refuse a replacement that already serves one', () => {
    const h = clusterWithOneCopyOn('n2');
    const refused = replyOf(h.run({ type: 'ReplaceNode', old: 'n3', new: 'n2', replyTo: adminReplyTo() }));
    expect(refused).toMatchObject({ type: 'NodeOperationRefused', reason: 'serving', message: 'n2 already serves 1 copy: a replacement must start empty' });
    const reply = replyOf(h.run({ type: 'ReplaceNode', old: 'n2', new: 'n1', replyTo: adminReplyTo() }));
    expect(reply).toMatchObject({ type: 'NodeOperationAccepted', moves: 1, message: 'n2 is being replaced by n1: 1 copy to hand off' });
  });
});
