// A node's heartbeats (docs/ARCHITECTURE.md §11.4, §11.5) on a simulated clock: a node whose own
// event loop stalled says so in its heartbeats until a grant answers one of them; the lease still
// runs from each heartbeat's sending, so the stall never lengthens it; a replayed grant is dropped.
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { DroppedFrames } from '../../src/cluster/failure-detector/dropped.js';
import { HeartbeatSender } from '../../src/cluster/failure-detector/heartbeat-sender.js';
import { DETECTOR_FORMAT, type DetectorMessage, type MemberRef } from '../../src/cluster/failure-detector/messages.js';
import { NodeLease } from '../../src/cluster/failure-detector/node-lease.js';
import type { DetectorTransport, LinkEvents } from '../../src/cluster/failure-detector/transport.js';
import { incarnation, nodeId } from '../../src/core/ids.js';

const self: MemberRef = { node: nodeId('a'), incarnation: incarnation('a-1') };
const singleton: MemberRef = { node: nodeId('s'), incarnation: incarnation('s-1') };

/** A simulated clock whose process can stall: timers due meanwhile fire when it runs again, late. */
class StallingClock extends SimulatedClock {
  private stalledFns: (() => void)[] | undefined;
  override schedule(delayMs: number, fn: () => void) {
    return super.schedule(delayMs, () => (this.stalledFns ? this.stalledFns.push(fn) : fn()));
  }
  /** The process does not run for `ms`. */
  stall(ms: number): void {
    this.stalledFns = [];
    this.advance(ms);
    const due = this.stalledFns;
    this.stalledFns = undefined;
    for (const fn of due) fn();
  }
}

function setup() {
  const clock = new StallingClock(0);
  const sent: Extract<DetectorMessage, { type: 'heartbeat' }>[] = [];
  let events: LinkEvents | undefined;
  const transport: DetectorTransport = {
    listen: () => Promise.resolve('x'),
    connect: (_address, e) => {
      events = e;
      return { send: (m) => (m.type === 'heartbeat' && sent.push(m), true), close: () => {}, open: true, established: true };
    },
    close: () => Promise.resolve(),
  };
  const lease = new NodeLease();
  const dropped = new DroppedFrames();
  const sender = new HeartbeatSender({ transport, self, cluster: 'c', clock, heartbeatIntervalMs: 100, lease, dropped, onEvicted: () => {} });
  const grant = (seq: number) =>
    events!.message({ format: DETECTOR_FORMAT, cluster: 'c', type: 'grant', from: singleton, to: self, seq, epoch: 1, leaseMs: 500, heartbeatIntervalMs: 100 });
  return { clock, sent, sender, lease, dropped, grant };
}

describe('HeartbeatSender', () => {
  it('reports a stall of its own event loop until a grant answers a heartbeat that said it; the lease is not lengthened', () => {
    const w = setup();
    w.sender.follow({ member: singleton, address: 'x' });
    w.clock.advance(300);
    expect(w.sent.map((m) => m.stalledMs)).toEqual([undefined, undefined, undefined, undefined]);
    w.grant(w.sent.at(-1)!.seq);
    // The process does not run for 1.3 s: the next beat's timer (due at 400) fires 1200 ms late.
    const due = 400;
    w.clock.stall(1300);
    expect(w.sent.at(-1)).toMatchObject({ stalledMs: 1200 });
    const stalledSeq = w.sent.at(-1)!.seq;
    w.clock.advance(100); // that heartbeat went unanswered: the next one says it again
    expect(w.sent.at(-1)).toMatchObject({ stalledMs: 1200 });
    w.grant(stalledSeq);
    // The lease runs from that heartbeat's sending (at the end of the stall), not from its stall.
    expect(w.lease.holds(due + 1200 + 499)).toBe(true);
    expect(w.lease.holds(due + 1200 + 500)).toBe(false);
    w.clock.advance(100);
    expect(w.sent.at(-1)!.stalledMs).toBeUndefined(); // answered: said no more
  });

  it('does not report a timer a little late (within a heartbeat) as a stall', () => {
    const w = setup();
    w.sender.follow({ member: singleton, address: 'x' });
    w.clock.stall(200); // the beat due at 100 fires 100 ms late: not more than a heartbeat
    expect(w.sent.every((m) => m.stalledMs === undefined)).toBe(true);
  });

  it('drops a replayed grant, counted by cause', () => {
    const w = setup();
    w.sender.follow({ member: singleton, address: 'x' });
    const seq = w.sent[0]!.seq;
    w.grant(seq);
    w.grant(seq); // the same grant again
    expect(w.dropped.byCause.get('replayed')).toBe(1);
  });
});
