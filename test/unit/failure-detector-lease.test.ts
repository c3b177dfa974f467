// A node's lease (docs/ARCHITECTURE.md §11.4) on a simulated clock: measured from the heartbeat's
// sending, never lengthened by a late grant, dropped when stale or replayed, and bound to the epoch
// that granted it; a grant from an implausible future epoch is refused, and a clock that goes back
// voids the lease.
import { describe, expect, it } from 'vitest';
import { MAX_EPOCH_LEAP, NodeLease } from '../../src/cluster/failure-detector/node-lease.js';
import type { Dropped } from '../../src/cluster/failure-detector/messages.js';
import { incarnation, nodeId } from '../../src/core/ids.js';

const s1 = { node: nodeId('s'), incarnation: incarnation('s-1') };
const s2 = { node: nodeId('t'), incarnation: incarnation('t-1') };

describe('NodeLease', () => {
  it('holds from a grant until the answered heartbeat was sent plus leaseMs, not a moment longer', () => {
    const lease = new NodeLease();
    expect(lease.holds(0)).toBe(false);
    const seq = lease.send(s1, 1000);
    expect(lease.holds(1000)).toBe(false); // asked, not granted
    expect(lease.grant({ from: s1, seq, epoch: 4, leaseMs: 500 })).toBeUndefined();
    expect(lease.holds(1499)).toBe(true);
    expect(lease.holds(1500)).toBe(false);
    expect(lease.current).toEqual({ epoch: 4, until: 1500, singleton: s1 });
  });

  it('is shortened, never lengthened, by a grant that arrives late', () => {
    const lease = new NodeLease();
    const seq = lease.send(s1, 1000);
    // The grant arrives 450 ms later: the lease still ends at 1500, 50 ms after it arrived.
    lease.grant({ from: s1, seq, epoch: 1, leaseMs: 500 });
    expect(lease.holds(1450)).toBe(true);
    expect(lease.holds(1500)).toBe(false);
  });

  it('keeps the latest end when grants of one singleton arrive out of order', () => {
    const lease = new NodeLease();
    const first = lease.send(s1, 0);
    const second = lease.send(s1, 100);
    expect(lease.grant({ from: s1, seq: second, epoch: 1, leaseMs: 500 })).toBeUndefined();
    // The first heartbeat is done with once a later one is granted.
    expect(lease.grant({ from: s1, seq: first, epoch: 1, leaseMs: 500 })?.cause).toBe('replayed');
    expect(lease.current?.until).toBe(600);
  });

  it('drops a grant that answers no outstanding heartbeat, or comes from another singleton than asked', () => {
    const lease = new NodeLease();
    expect(lease.grant({ from: s1, seq: 1, epoch: 1, leaseMs: 500 })?.cause).toBe('replayed');
    const seq = lease.send(s1, 0);
    expect(lease.grant({ from: s2, seq, epoch: 1, leaseMs: 500 })?.cause).toBe('replayed');
    expect(lease.grant({ from: s1, seq, epoch: 1, leaseMs: 500 })).toBeUndefined();
    expect(lease.grant({ from: s1, seq, epoch: 1, leaseMs: 500 })?.cause).toBe('replayed'); // the same grant again
    expect(lease.holds(10)).toBe(true);
  });

  it('drops grants of an older epoch; a newer epoch starts the lease over, bound to that epoch', () => {
    const lease = new NodeLease();
    lease.grant({ from: s1, seq: lease.send(s1, 0), epoch: 5, leaseMs: 500 });
    const toOld = lease.send(s1, 100);
    lease.grant({ from: s2, seq: lease.send(s2, 200), epoch: 6, leaseMs: 300 });
    expect(lease.grant({ from: s1, seq: toOld, epoch: 5, leaseMs: 500 })?.cause).toBe('stale-epoch');
    expect(lease.holds(450, 6)).toBe(true);
    expect(lease.holds(450, 5)).toBe(false); // a new singleton's lease authorizes nothing of the old epoch
    expect(lease.holds(500)).toBe(false); // 200 + 300, not the old singleton's 500
    expect(lease.epoch).toBe(6);
  });

  it('ends at once on an eviction it asked for, and takes no grant after', () => {
    const lease = new NodeLease();
    lease.grant({ from: s1, seq: lease.send(s1, 0), epoch: 2, leaseMs: 500 });
    expect(lease.evicted({ from: s1, seq: 99, epoch: 2 })?.cause).toBe('replayed');
    expect(lease.evicted({ from: s1, seq: lease.send(s1, 50), epoch: 1 })?.cause).toBe('stale-epoch');
    const seq = lease.send(s1, 100);
    expect(lease.evicted({ from: s1, seq, epoch: 2 })).toBeUndefined();
    expect(lease.holds(101)).toBe(false);
    expect(lease.released).toBe(true);
    expect(lease.grant({ from: s1, seq: lease.send(s1, 200), epoch: 2, leaseMs: 500 })?.cause).toBe('replayed');
    expect(lease.holds(201)).toBe(false);
  });

  it('holds nothing after it was released (a graceful stop)', () => {
    const lease = new NodeLease();
    const seq = lease.send(s1, 0);
    lease.release();
    expect(lease.grant({ from: s1, seq, epoch: 1, leaseMs: 500 })?.cause).toBe('replayed');
    expect(lease.holds(1)).toBe(false);
  });

  it('refuses a grant or eviction far ahead of every epoch seen: taking it would make every genuine grant look stale', () => {
    const lease = new NodeLease();
    // Nothing seen yet: the first grant says which epoch it is, whatever it is.
    expect(lease.grant({ from: s1, seq: lease.send(s1, 0), epoch: 5000, leaseMs: 500 })).toBeUndefined();
    expect(lease.grant({ from: s1, seq: lease.send(s1, 10), epoch: 5000 + MAX_EPOCH_LEAP, leaseMs: 500 })).toBeUndefined();
    const seq = lease.send(s1, 20);
    expect(lease.grant({ from: s1, seq, epoch: 5001 + 2 * MAX_EPOCH_LEAP, leaseMs: 500 })?.cause).toBe('future-epoch');
    expect(lease.evicted({ from: s1, seq, epoch: 5001 + 2 * MAX_EPOCH_LEAP })?.cause).toBe('future-epoch');
    expect(lease.epoch).toBe(5000 + MAX_EPOCH_LEAP); // nothing of it was taken
    expect(lease.grant({ from: s1, seq, epoch: 6000, leaseMs: 500 })).toBeUndefined(); // the genuine answer still counts
    // An epoch seen elsewhere (a map of the events topic) counts as seen.
    const fresh = new NodeLease();
    fresh.sawEpoch(7);
    expect(fresh.grant({ from: s1, seq: fresh.send(s1, 0), epoch: 8 + MAX_EPOCH_LEAP, leaseMs: 500 })?.cause).toBe('future-epoch');
    expect(fresh.newestKnownEpoch).toBe(7);
  });

  it('is void when the clock goes back: it was measured on readings now ahead of the clock', () => {
    const jumps: Dropped[] = [];
    const lease = new NodeLease((d) => jumps.push(d));
    const early = lease.send(s1, 10_000);
    lease.grant({ from: s1, seq: lease.send(s1, 10_050), epoch: 2, leaseMs: 500 });
    expect(lease.holds(10_100)).toBe(true);
    // The clock reads 9000: the lease would seem to run 1.1 s more than it was granted.
    expect(lease.holds(9_000)).toBe(false);
    expect(jumps).toEqual([{ cause: 'clock-jump', detail: expect.stringMatching(/went back 1100 ms/) as unknown as string }]);
    // A heartbeat sent before the jump is not outstanding any more; one sent after it holds again.
    expect(lease.grant({ from: s1, seq: early, epoch: 2, leaseMs: 500 })?.cause).toBe('replayed');
    expect(lease.grant({ from: s1, seq: lease.send(s1, 9_010), epoch: 2, leaseMs: 500 })).toBeUndefined();
    expect(lease.holds(9_500)).toBe(true);
    expect(lease.holds(9_510)).toBe(false);
    expect(jumps).toHaveLength(1); // a clock that leaps forward only ends it sooner: nothing to say
    expect(lease.holds(100_000)).toBe(false);
    expect(jumps).toHaveLength(1);
  });
});
