// Each singleton epoch reads the inbox in a group of its own, from where the last singleton's group
// left off (src/actors/inbox-group.ts): a dead singleton's group membership cannot hold up its
// successor, and no applied request is read again, none skipped.
import { describe, expect, it } from 'vitest';
import { inboxGroup, inboxStart, sharedInboxGroup } from '../../src/actors/inbox-group.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { MemoryBus } from '../../src/cluster/memory-bus.js';

const INBOX = 'c.inbox';

async function read(
  bus: MemoryBus,
  group: string,
  startAt: number | undefined,
  upTo: number,
): Promise<{ offsets: number[]; commit: (o: number) => Promise<void> }> {
  const offsets: number[] = [];
  const sub = await bus.subscribe(INBOX, group, (r) => void offsets.push(r.offset), { start: 'earliest', ...(startAt === undefined ? {} : { startAt }) });
  for (let i = 0; i < 50 && (offsets.at(-1) ?? -1) < upTo; i++) await new Promise((r) => setImmediate(r));
  return { offsets, commit: (o) => sub.commit(o) };
}

describe('inbox groups per singleton epoch', () => {
  it('a new epoch starts where the newest earlier group left off, skipping epochs that never committed', async () => {
    const bus = new MemoryBus(new SimulatedClock(0));
    for (let i = 0; i < 10; i++) await bus.produce(INBOX, { n: i });
    expect(await inboxStart(bus, INBOX, 1)).toBeUndefined(); // nobody read it yet: from the start
    const first = await read(bus, inboxGroup(INBOX, 1), undefined, 9);
    expect(first.offsets).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    await first.commit(6); // applied 0..5
    // Epoch 2 died before it committed anything; epoch 3 starts after epoch 1's last applied request.
    expect(await inboxStart(bus, INBOX, 3)).toBe(6);
    const third = await read(bus, inboxGroup(INBOX, 3), 6, 9);
    expect(third.offsets).toEqual([6, 7, 8, 9]);
    await third.commit(8);
    expect(await inboxStart(bus, INBOX, 4)).toBe(8);
  });

  it('a cluster upgraded from the shared group goes on from its position', async () => {
    const bus = new MemoryBus(new SimulatedClock(0));
    for (let i = 0; i < 5; i++) await bus.produce(INBOX, { n: i });
    const shared = await read(bus, sharedInboxGroup(INBOX), undefined, 4);
    await shared.commit(3);
    expect(await inboxStart(bus, INBOX, 7)).toBe(3);
  });
});
