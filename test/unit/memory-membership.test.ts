// The in-memory membership service: join order and generations, failure detection by heartbeat
// and session timeout on a simulated clock, immediate leave, and the simulator's fault hooks
// (crash, pause/resume) — what every node of an embedded cluster relies on to find the singleton.
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { isMember, oldestMember, type MembershipView } from '../../src/cluster/membership.js';
import { MemoryMembershipService, type MemoryMembership } from '../../src/cluster/memory-membership.js';
import { incarnation, nodeId } from '../../src/core/ids.js';

const SESSION = 1000;
const HEARTBEAT = 300;

function setup(start = 0): { clock: SimulatedClock; service: MemoryMembershipService } {
  const clock = new SimulatedClock(start);
  return { clock, service: new MemoryMembershipService(clock, { sessionTimeoutMs: SESSION, heartbeatIntervalMs: HEARTBEAT }) };
}

/** A connected handle that records every view it hears. */
function node(service: MemoryMembershipService): { handle: MemoryMembership; heard: MembershipView[] } {
  const handle = service.connect();
  const heard: MembershipView[] = [];
  handle.onChange((v) => heard.push(v));
  return { handle, heard };
}

const req = (name: string, inc = 1, rack?: string) => ({
  node: nodeId(name),
  incarnation: incarnation(`${name}#${inc}`),
  ...(rack === undefined ? {} : { rack }),
});
const names = (v: MembershipView): string[] => v.members.map((m) => `${m.node}#${m.incarnation.split('#')[1]}`);
const gens = (views: MembershipView[]): number[] => views.map((v) => v.generation);

/** Nodes a and b, joined in that order (a is the oldest), each recording what it hears. */
async function joinedPair() {
  const { clock, service } = setup();
  const a = node(service);
  const b = node(service);
  await a.handle.join(req('a'));
  await b.handle.join(req('b'));
  return { clock, service, a, b };
}

describe('MemoryMembershipService', () => {
  it('lists members oldest first with strictly increasing joinedAt, one generation per join, heard by every handle in order', async () => {
    const { clock, service } = setup(5000);
    const a = node(service);
    const b = node(service);
    const viewA = await a.handle.join(req('a', 1, 'rack-1'));
    expect(names(viewA)).toEqual(['a#1']);
    expect(viewA.generation).toBe(1);
    expect(viewA.members[0]).toEqual({ node: 'a', incarnation: 'a#1', joinedAt: 5000, rack: 'rack-1' });

    await b.handle.join(req('b')); // same millisecond as a
    clock.advance(50);
    const c = node(service); // connects late: hears views from now on
    const viewC = await c.handle.join(req('c'));

    expect(names(viewC)).toEqual(['a#1', 'b#1', 'c#1']);
    expect(viewC.members.map((m) => m.joinedAt)).toEqual([5000, 5001, 5050]);
    expect(oldestMember(viewC)?.node).toBe('a');
    expect(gens(a.heard)).toEqual([1, 2, 3]);
    expect(gens(b.heard)).toEqual([1, 2, 3]); // b heard a's join too: it was connected
    expect(gens(c.heard)).toEqual([3]);
    for (const h of [a, b, c]) expect(h.handle.view()).toEqual(viewC);
    expect(service.view()).toEqual(viewC);
  });

  it('joining twice with the same incarnation changes nothing', async () => {
    const { service } = setup();
    const a = node(service);
    await a.handle.join(req('a'));
    const again = await a.handle.join(req('a'));
    expect(again.generation).toBe(1);
    expect(gens(a.heard)).toEqual([1]);
  });

  it('members that keep heartbeating stay, however long it runs', async () => {
    const { clock, service, a } = await joinedPair();
    clock.advance(60 * SESSION);
    expect(names(service.view())).toEqual(['a#1', 'b#1']);
    expect(gens(a.heard)).toEqual([1, 2]);
  });

  it('a crashed member is removed exactly one session timeout after its last heartbeat, not before', async () => {
    const { clock, a, b } = await joinedPair();
    clock.advanceTo(1000); // b heartbeat at 300, 600, 900
    b.handle.crash();

    clock.advanceTo(1899);
    expect(names(a.handle.view())).toEqual(['a#1', 'b#1']);
    clock.advanceTo(1900);
    expect(names(a.handle.view())).toEqual(['a#1']);
    expect(gens(a.heard)).toEqual([1, 2, 3]);
    expect(gens(b.heard)).toEqual([1, 2]); // a crashed process hears nothing
    expect(names(b.handle.view())).toEqual(['a#1', 'b#1']);
    await expect(b.handle.join(req('b', 2))).rejects.toThrow(/crashed/);
  });

  it('leave is immediate: the others hear the view without the member at once', async () => {
    const { clock, a, b } = await joinedPair();
    const timersBefore = clock.pendingTimers;
    await a.handle.leave();
    expect(names(b.handle.view())).toEqual(['b#1']);
    expect(oldestMember(b.handle.view())?.node).toBe('b');
    expect(gens(b.heard)).toEqual([1, 2, 3]);
    expect(names(a.handle.view())).toEqual(['b#1']); // the leaver keeps hearing views
    expect(clock.pendingTimers).toBe(timersBefore - 2); // a's heartbeat and session timers are gone
    clock.advance(10 * SESSION);
    expect(gens(b.heard)).toEqual([1, 2, 3]);
  });

  it('a pause longer than the session timeout: the others see the member gone; on resume it hears a view without itself', async () => {
    const { clock, service, a, b } = await joinedPair();
    clock.advanceTo(1000); // last heartbeat of b at 900
    b.handle.pause();

    clock.advanceTo(1899);
    expect(names(a.handle.view())).toEqual(['a#1', 'b#1']);
    clock.advanceTo(3000);
    expect(names(a.handle.view())).toEqual(['a#1']);
    expect(gens(b.heard)).toEqual([1, 2]); // paused: heard nothing
    expect(names(b.handle.view())).toEqual(['a#1', 'b#1']);

    b.handle.resume();
    expect(gens(b.heard)).toEqual([1, 2, 3]);
    expect(isMember(b.handle.view(), nodeId('b'), incarnation('b#1'))).toBe(false);
    clock.advance(10 * SESSION); // its heartbeats do not bring it back
    expect(names(service.view())).toEqual(['a#1']);
    expect(service.view().generation).toBe(3);
  });

  it('a pause shorter than the session timeout goes unnoticed', async () => {
    const { clock, a, b } = await joinedPair();
    clock.advanceTo(1000); // last heartbeat of b at 900
    b.handle.pause();
    clock.advanceTo(1850);
    b.handle.resume();
    clock.advance(10 * SESSION);
    expect(names(a.handle.view())).toEqual(['a#1', 'b#1']);
    expect(gens(a.heard)).toEqual([1, 2]);
    expect(gens(b.heard)).toEqual([1, 2]);
  });

  it('views that change while a handle is paused are skipped: on resume it hears only the current one', async () => {
    const { service } = setup();
    const a = node(service);
    const b = node(service);
    const c = node(service);
    await a.handle.join(req('a'));
    a.handle.pause();
    await b.handle.join(req('b'));
    await c.handle.join(req('c'));
    await b.handle.leave();
    a.handle.resume();
    expect(gens(a.heard)).toEqual([1, 4]);
    expect(names(a.handle.view())).toEqual(['a#1', 'c#1']);
  });

  it('a restarted node (new handle, new incarnation) replaces the old one: the old leaves, then the new joins as the youngest', async () => {
    const { clock, service } = setup();
    const a = node(service);
    const b1 = node(service);
    const c = node(service);
    await a.handle.join(req('a'));
    await b1.handle.join(req('b'));
    await c.handle.join(req('c'));
    clock.advance(100);
    b1.handle.crash();

    const b2 = node(service);
    const joined = await b2.handle.join(req('b', 2));
    expect(names(joined)).toEqual(['a#1', 'c#1', 'b#2']);
    expect(gens(a.heard)).toEqual([1, 2, 3, 4, 5]);
    expect(names(a.heard[3]!)).toEqual(['a#1', 'c#1']); // old incarnation gone
    expect(names(a.heard[4]!)).toEqual(['a#1', 'c#1', 'b#2']); // new one joined
    clock.advance(10 * SESSION); // the old incarnation's session timer does not remove the new one
    expect(names(service.view())).toEqual(['a#1', 'c#1', 'b#2']);
  });

  it('a node dropped from the view can join again on the same handle with a new incarnation', async () => {
    const { clock, a, b } = await joinedPair();
    b.handle.pause();
    clock.advance(2 * SESSION);
    b.handle.resume();
    expect(isMember(b.handle.view(), nodeId('b'), incarnation('b#1'))).toBe(false);

    const view = await b.handle.join(req('b', 2));
    expect(names(view)).toEqual(['a#1', 'b#2']);
    clock.advance(10 * SESSION);
    expect(names(a.handle.view())).toEqual(['a#1', 'b#2']);
  });

  it('joining under a new incarnation while still a member replaces the old incarnation in two generations', async () => {
    const { service } = setup();
    const a = node(service);
    const b = node(service);
    await a.handle.join(req('a'));
    await b.handle.join(req('b'));
    await b.handle.join(req('b', 2));
    expect(gens(a.heard)).toEqual([1, 2, 3, 4]);
    expect(names(a.heard[2]!)).toEqual(['a#1']);
    expect(names(a.handle.view())).toEqual(['a#1', 'b#2']);
  });

  it('a change made by a listener is announced after the current view reached everyone: every handle hears generations in order', async () => {
    const { service } = setup();
    const a = node(service);
    const b = node(service);
    const c = node(service);
    await a.handle.join(req('a'));
    await b.handle.join(req('b'));
    // b leaves as soon as it hears that c joined.
    b.handle.onChange((v) => {
      if (v.members.some((m) => m.node === 'c')) void b.handle.leave();
    });
    await c.handle.join(req('c'));
    // c, told after b, would otherwise hear generation 4 before 3 (or miss 3).
    for (const h of [a, b, c]) expect(gens(h.heard)).toEqual([1, 2, 3, 4]);
    expect(names(c.handle.view())).toEqual(['a#1', 'c#1']);
  });

  it('an unsubscribed listener hears nothing more', async () => {
    const { service } = setup();
    const a = service.connect();
    const heard: number[] = [];
    const off = a.onChange((v) => heard.push(v.generation));
    await a.join(req('a'));
    off();
    await service.connect().join(req('b'));
    expect(heard).toEqual([1]);
    expect(a.view().generation).toBe(2); // the handle itself still knows the view
  });

  it('a listener that throws does not keep the view from the other handles; the error surfaces', async () => {
    const { service } = setup();
    const a = service.connect();
    a.onChange(() => {
      throw new Error('listener bug');
    });
    const b = node(service);
    await expect(a.join(req('a'))).rejects.toThrow('listener bug');
    expect(gens(b.heard)).toEqual([1]);
    expect(names(service.view())).toEqual(['a#1']);
  });

  it('close leaves at once and silences the handle: its listeners hear no later view', async () => {
    const { clock, service, a, b } = await joinedPair();
    await a.handle.close();
    expect(names(b.handle.view())).toEqual(['b#1']);
    expect(gens(a.heard)).toEqual([1, 2, 3]); // heard its own departure
    await service.connect().join(req('c'));
    clock.advance(10 * SESSION);
    expect(gens(a.heard)).toEqual([1, 2, 3]);
    expect(a.handle.view().generation).toBe(3);
    await expect(a.handle.join(req('a', 2))).rejects.toThrow(/closed/);
    await a.handle.close(); // idempotent
  });

  it('with onListenerError, a throwing listener is reported there and the change goes through quietly', async () => {
    const clock = new SimulatedClock();
    const reported: unknown[] = [];
    const service = new MemoryMembershipService(clock, { sessionTimeoutMs: SESSION, heartbeatIntervalMs: HEARTBEAT, onListenerError: (e) => reported.push(e) });
    const a = service.connect();
    a.onChange(() => {
      throw new Error('listener bug');
    });
    const view = await a.join(req('a'));
    expect(names(view)).toEqual(['a#1']);
    expect(reported.map((e) => (e as Error).message)).toEqual(['listener bug']);
    a.pause();
    await service.connect().join(req('b'));
    a.resume(); // hears the missed view: its listener throws again, reported the same way
    expect(reported).toHaveLength(2);
  });

  it('refuses a session timeout that is not longer than the heartbeat interval', () => {
    const clock = new SimulatedClock();
    expect(() => new MemoryMembershipService(clock, { sessionTimeoutMs: 300, heartbeatIntervalMs: 300 })).toThrow(RangeError);
    expect(() => new MemoryMembershipService(clock, { sessionTimeoutMs: 1000, heartbeatIntervalMs: 0 })).toThrow(RangeError);
  });
});
