// A node's detector (docs/ARCHITECTURE.md §11.9, §11.10) over the in-process transport on a
// simulated clock: a singleton announcement of an older epoch, or of one far ahead of every epoch
// the node has seen, is dropped and counted, never followed.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Gate } from '../../src/actors/gate.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { MemoryDetectorNetwork } from '../../src/cluster/failure-detector/memory-transport.js';
import { DETECTOR_FORMAT, type MemberRef } from '../../src/cluster/failure-detector/messages.js';
import { NodeDetector } from '../../src/cluster/failure-detector/node-detector.js';
import { MAX_EPOCH_LEAP } from '../../src/cluster/failure-detector/node-lease.js';
import { failureDetectorSettings } from '../../src/cluster/failure-detector/settings.js';
import { incarnation, nodeId } from '../../src/core/ids.js';

const ref = (n: string): MemberRef => ({ node: nodeId(n), incarnation: incarnation(`${n}-1`) });
const turns = async (n = 20) => {
  for (let i = 0; i < n; i++) await new Promise<void>((r) => setImmediate(r));
};

describe('NodeDetector', () => {
  it('drops a singleton announcement of an older epoch, or of one far ahead of every epoch seen', async () => {
    const clock = new SimulatedClock(0);
    const network = new MemoryDetectorNetwork(clock, { cluster: 'c' });
    const a = ref('a');
    const detector = new NodeDetector({
      settings: failureDetectorSettings({ mode: 'heartbeat' }),
      self: a,
      cluster: 'c',
      transport: () => network.transport(new Gate()),
      clock,
      log: pino({ level: 'silent' }),
      pick: () => 0,
      onEvicted: () => {},
    });
    const address = await detector.start();
    const sender = network.transport(new Gate());
    const link = sender.connect(address, { message: () => {}, ended: () => {} });
    const announce = (epoch: number, seq: number) =>
      link.send({ format: DETECTOR_FORMAT, cluster: 'c', type: 'singleton', from: ref('s'), to: a, seq, epoch, address: 'mem-s' });
    const advance = async (ms: number) => {
      for (let t = 0; t < ms; t++) {
        clock.advance(1);
        await turns(3);
      }
    };
    await advance(5);
    announce(7, 1); // the first: nothing to compare with
    await advance(20);
    announce(8 + MAX_EPOCH_LEAP, 2); // a thousand and one takeovers unseen: forged or corrupt
    announce(6, 3); // older than the one followed
    announce(7 + MAX_EPOCH_LEAP, 4); // a thousand: still plausible
    await advance(20);
    const dropped = Object.fromEntries([...detector.dropped.byCause].filter(([, n]) => n > 0));
    expect(dropped).toEqual({ 'future-epoch': 1, 'stale-epoch': 1 });
    await detector.close();
    await sender.close();
  });
});
