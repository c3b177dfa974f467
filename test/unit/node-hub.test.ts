// NodeHub: a message for a dataset's local subscribers is built once for them all, and not at all
// when the node hosts none (a whole map copied for nobody cost a node of 65 536 shards ~50 ms).
import { describe, expect, it } from 'vitest';
import { NodeHub } from '../../src/actors/node-hub.js';
import type { DatasetRef, SubscriberId } from '../../src/core/ids.js';
import type { SubscriberMessage } from '../../src/core/shard-manager/protocol.js';

const ds = 'metrics' as DatasetRef;
const stamp: SubscriberMessage = { type: 'ShardMapStamp', epoch: 1, dataset: ds, version: 3 } as SubscriberMessage;

describe('NodeHub', () => {
  it('builds a dataset message once for all its local subscribers, and never when there are none', () => {
    const hub = new NodeHub();
    let built = 0;
    const message = () => {
      built++;
      return stamp;
    };
    hub.deliverToDataset(ds, message);
    expect(built).toBe(0);
    const got: SubscriberMessage[] = [];
    hub.register('a' as SubscriberId, (m) => got.push(m), ds);
    hub.register('b' as SubscriberId, (m) => got.push(m), ds);
    hub.register('c' as SubscriberId, () => expect.unreachable('c follows another dataset'), 'logs' as DatasetRef);
    hub.deliverToDataset(ds, message);
    expect(built).toBe(1);
    expect(got).toEqual([stamp, stamp]);
  });
});
