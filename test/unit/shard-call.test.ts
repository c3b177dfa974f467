// The failover rules of routed requests, on a simulated clock with a fake transport: the next copy
// at once after a transport error, and as well (not instead) after a timeout, rounds with backoff
// until the deadline, the retry budget,
// application errors not failed over, MOVED and ASK, hedging; suspicion with probes; spreading.
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import type { NodeId } from '../../src/core/ids.js';
import type { ShardCheck } from '../../src/core/shard-check.js';
import { ShardherdClientError } from '../../src/client/client-errors.js';
import { LatencyWindow, ReplicaChoice, Suspicions } from '../../src/client/replica-choice.js';
import { RetryBudget } from '../../src/client/retry-budget.js';
import { Cancellation } from '../../src/core/cancellation.js';
import { callShard, type AttemptAnswer, type CallOptions, type CallPorts } from '../../src/client/shard-call.js';

const n = (x: string) => x as NodeId;
const flush = () => new Promise<void>((r) => setImmediate(r));
const OPTIONS: CallOptions = { deadlineMs: 1_000, attemptTimeoutMs: 200, maxRedirects: 3, retryBackoffMs: 10, dataset: 'ds' };

type Behaviour = (node: NodeId, signal: AbortSignal) => Promise<AttemptAnswer<string>>;
const ok = (node: NodeId): Promise<AttemptAnswer<string>> => Promise.resolve({ check: { type: 'ok', version: 1 }, value: `from ${node}` });
const refused = (): Promise<AttemptAnswer<string>> => Promise.reject(new Error('ECONNREFUSED'));
const never = (_: NodeId, signal: AbortSignal): Promise<AttemptAnswer<string>> =>
  new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
const answer = (check: ShardCheck): Promise<AttemptAnswer<string>> => Promise.resolve({ check });

class AppError extends Error {}

function fakePorts(clock: SimulatedClock, nodes: string[], behaviours: Record<string, Behaviour>) {
  const asked: string[] = [];
  const failed: string[] = [];
  const aborted: string[] = [];
  let serving = nodes.map(n);
  const learned: ShardCheck[] = [];
  const ports: CallPorts<string> = {
    clock,
    candidates: () => serving,
    version: () => 1,
    learn: (_s, check) => {
      learned.push(check);
      serving = [...check.nodes];
    },
    send: (node, _shard, _v, cancellation) => {
      const signal = cancellation.signal;
      asked.push(node);
      signal.addEventListener('abort', () => aborted.push(node));
      return (behaviours[node] ?? ok)(node, signal);
    },
    isApplicationError: (e) => e instanceof AppError,
    failed: (node) => void failed.push(node),
    answered: () => {},
  };
  return { ports, asked, failed, aborted, learned, setServing: (x: string[]) => (serving = x.map(n)) };
}

/** Runs the simulated clock forward `ms`, letting promises settle at each 10 ms step. */
async function advance(clock: SimulatedClock, ms: number): Promise<void> {
  for (let t = 0; t < ms; t += 10) {
    clock.advance(10);
    for (let i = 0; i < 5; i++) await flush();
  }
}

async function settle<T>(p: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  return p.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
}

describe('callShard', () => {
  it('asks the next copy at once after a transport error, within the same call', async () => {
    const clock = new SimulatedClock(0);
    const f = fakePorts(clock, ['a', 'b'], { a: refused });
    expect(await callShard(f.ports, 0, OPTIONS)).toBe('from b');
    expect(f.asked).toEqual(['a', 'b']);
    expect(f.failed).toEqual(['a']);
    expect(clock.now()).toBe(0);
  });

  it('asks the next copy after the per-attempt timeout, and cancels the silent one', async () => {
    const clock = new SimulatedClock(0);
    const f = fakePorts(clock, ['a', 'b'], { a: never });
    const call = settle(callShard(f.ports, 0, OPTIONS));
    await flush();
    expect(f.asked).toEqual(['a']);
    clock.advance(199);
    await flush();
    expect(f.asked).toEqual(['a']);
    clock.advance(1);
    await flush();
    expect((await call).value).toBe('from b');
    expect(f.aborted).toContain('a');
    expect(f.failed).toEqual(['a']);
  });

  it('asks every copy again in rounds with backoff while they fail, until the deadline: then SHARD_UNAVAILABLE naming each copy', async () => {
    const clock = new SimulatedClock(0);
    const f = fakePorts(clock, ['a', 'b'], { a: refused, b: refused });
    const call = settle(callShard(f.ports, 3, OPTIONS));
    await advance(clock, 1_000);
    const { error } = await call;
    expect(error).toMatchObject({ code: 'SHARD_UNAVAILABLE', shard: 3, retriable: true });
    expect((error as Error).message).toMatch(/a: ECONNREFUSED; b: ECONNREFUSED/);
    // Rounds at 0, 10, 30, 70, 150, 230 ... ms: backoff doubling to 8 × 10 ms.
    expect(f.asked.length).toBeGreaterThan(10);
    expect(f.asked.length).toBeLessThan(40);

    const none = fakePorts(clock, [], {});
    const nothing = settle(callShard(none.ports, 3, OPTIONS));
    await advance(clock, 1_000);
    expect((await nothing).error).toMatchObject({ code: 'SHARD_UNAVAILABLE', message: expect.stringContaining('the map shows no serving copy') as unknown });
  });

  it('answers once a failing copy comes back or a serving copy appears, within the deadline', async () => {
    const clock = new SimulatedClock(0);
    let down = true;
    const flaky: Behaviour = (node) => (down ? refused() : ok(node));
    const f = fakePorts(clock, ['a', 'b'], { a: flaky, b: flaky });
    const call = settle(callShard(f.ports, 0, OPTIONS));
    await advance(clock, 300);
    down = false;
    await advance(clock, 100);
    expect((await call).value).toMatch(/^from [ab]$/);

    const later = fakePorts(clock, [], {});
    const waiting = settle(callShard(later.ports, 0, OPTIONS));
    await advance(clock, 200);
    later.setServing(['c']);
    await advance(clock, 100);
    expect((await waiting).value).toBe('from c');
  });

  it('a slow copy is not given up: the next is asked as well, and the first answer wins (a slow handler still answers)', async () => {
    const clock = new SimulatedClock(0);
    // Both copies take 1200 ms; attempts time out after 1000 ms; the deadline is 5000 ms.
    const slow: Behaviour = (node) => new Promise((resolve) => clock.schedule(1_200, () => void ok(node).then(resolve)));
    const f = fakePorts(clock, ['a', 'b'], { a: slow, b: slow });
    const call = settle(callShard(f.ports, 0, { ...OPTIONS, deadlineMs: 5_000, attemptTimeoutMs: 1_000 }));
    await advance(clock, 1_000);
    expect(f.asked).toEqual(['a', 'b']);
    expect(f.aborted).toEqual([]);
    await advance(clock, 200);
    expect((await call).value).toBe('from a');
    expect(f.asked).toEqual(['a', 'b']);
    expect(f.aborted).toEqual(['b']);
    expect(clock.now()).toBe(1_200);
  });

  it('draws attempts beyond the first from the retry budget, and fails at once, OVERLOADED, when it is spent and nothing is in flight', async () => {
    const clock = new SimulatedClock(0);
    let left = 1;
    const f = fakePorts(clock, ['a', 'b', 'c'], { a: refused, b: refused, c: refused });
    const ports = { ...f.ports, retryBudget: { tryWithdraw: () => left-- > 0 } };
    const { error } = await settle(callShard(ports, 0, OPTIONS));
    expect(f.asked).toEqual(['a', 'b']);
    expect(error).toMatchObject({ code: 'OVERLOADED', message: expect.stringContaining('retry budget is spent, so c was not asked') as unknown });
    expect(clock.now()).toBe(0);
  });

  it('goes round the copies again after a backoff while they say TRYAGAIN, until one serves or the deadline', async () => {
    const clock = new SimulatedClock(0);
    let handoffDone = false;
    const tryagain: Behaviour = (node) => (handoffDone ? ok(node) : answer({ type: 'tryagain', version: 1 }));
    const f = fakePorts(clock, ['a', 'b'], { a: tryagain, b: tryagain });
    const call = settle(callShard(f.ports, 0, OPTIONS));
    await flush();
    expect(f.asked).toEqual(['a', 'b']);
    clock.advance(10);
    await flush();
    expect(f.asked).toEqual(['a', 'b', 'a', 'b']);
    handoffDone = true;
    clock.advance(20);
    await flush();
    expect((await call).value).toBe('from a');

    const forever = fakePorts(clock, ['a'], { a: () => answer({ type: 'tryagain', version: 1 }) });
    const start = clock.now();
    const stuck = settle(callShard(forever.ports, 0, OPTIONS));
    for (let i = 0; i < 20; i++) {
      clock.advance(50);
      await flush();
    }
    const { error } = await stuck;
    expect(error).toMatchObject({ code: 'DEADLINE_EXCEEDED' });
    expect(forever.asked.length).toBeGreaterThan(5);
    expect(clock.now() - start).toBeGreaterThanOrEqual(1_000);
  });

  it('passes an application error to the caller without asking another copy', async () => {
    const clock = new SimulatedClock(0);
    const f = fakePorts(clock, ['a', 'b'], { a: () => Promise.reject(new AppError('bad query')), b: ok });
    await expect(callShard(f.ports, 0, OPTIONS)).rejects.toBeInstanceOf(AppError);
    expect(f.asked).toEqual(['a']);
  });

  it('follows MOVED (learned) and ASK, and gives up after maxRedirects', async () => {
    const clock = new SimulatedClock(0);
    const f = fakePorts(clock, ['a'], {
      a: () => answer({ type: 'moved', nodes: [n('c')], version: 5 }),
      c: () => answer({ type: 'ask', node: n('d'), version: 5 }),
    });
    expect(await callShard(f.ports, 0, OPTIONS)).toBe('from d');
    expect(f.asked).toEqual(['a', 'c', 'd']);
    expect(f.learned).toHaveLength(1);
    const loop = fakePorts(clock, ['a'], { a: () => answer({ type: 'ask', node: n('a'), version: 5 }) });
    await expect(callShard(loop.ports, 0, OPTIONS)).rejects.toMatchObject({ code: 'TOO_MANY_REDIRECTS' });
    expect(loop.asked).toHaveLength(4);
  });

  it('hedges: a second copy after the delay, the first answer wins and the other is cancelled', async () => {
    const clock = new SimulatedClock(0);
    let release: (() => void) | undefined;
    const slow: Behaviour = (node) => new Promise((resolve) => (release = () => void ok(node).then(resolve)));
    const f = fakePorts(clock, ['a', 'b'], { a: slow, b: never });
    const call = settle(callShard(f.ports, 0, { ...OPTIONS, hedgeDelayMs: 30 }));
    await flush();
    expect(f.asked).toEqual(['a']);
    clock.advance(30);
    await flush();
    expect(f.asked).toEqual(['a', 'b']);
    release!();
    await flush();
    expect((await call).value).toBe('from a');
    expect(f.aborted).toEqual(['b']);
    // Without a hedge delay nobody else is asked while the first copy is silent.
    const g = fakePorts(clock, ['a', 'b'], { a: never });
    const single = settle(callShard(g.ports, 0, OPTIONS));
    clock.advance(100);
    await flush();
    expect(g.asked).toEqual(['a']);
    clock.advance(100);
    await flush();
    expect((await single).value).toBe('from b');
  });

  it('ends at once with the reason of its cancellation (the client closed), calling off the attempts in flight', async () => {
    const clock = new SimulatedClock(0);
    const f = fakePorts(clock, ['a', 'b'], { a: never, b: never });
    const closing = new Cancellation();
    const call = settle(callShard(f.ports, 0, { ...OPTIONS, cancellation: closing }));
    await flush();
    expect(f.asked).toEqual(['a']);
    const closed = new ShardherdClientError('CLOSED', 'the client was closed');
    closing.cancel(closed);
    expect((await call).error).toBe(closed);
    expect(f.aborted).toEqual(['a']);
    // Already cancelled: nothing is asked.
    const g = fakePorts(clock, ['a'], {});
    expect((await settle(callShard(g.ports, 0, { ...OPTIONS, cancellation: closing }))).error).toBe(closed);
    expect(g.asked).toEqual([]);
  });

  it('errors are typed ShardherdClientErrors with the dataset and shard', async () => {
    const clock = new SimulatedClock(0);
    const f = fakePorts(clock, ['a'], { a: refused });
    const call = settle(callShard(f.ports, 7, OPTIONS));
    await advance(clock, 1_000);
    const { error } = await call;
    expect(error).toBeInstanceOf(ShardherdClientError);
    expect(error).toMatchObject({ dataset: 'ds', shard: 7 });
    expect((error as Error).message).toContain('ECONNREFUSED');
  });
});

describe('RetryBudget', () => {
  it('allows the reserve per second plus ratio × requests, saved up to a cap, and counts what it refused', () => {
    const clock = new SimulatedClock(0);
    const budget = new RetryBudget(clock, { ratio: 0.2, minPerSecond: 2, maxSaved: 3 });
    const drain = () => {
      let n = 0;
      while (budget.tryWithdraw()) n++;
      return n;
    };
    expect(drain()).toBe(2); // the reserve
    for (let i = 0; i < 10; i++) budget.deposit();
    expect(drain()).toBe(2); // 10 requests × 0.2
    for (let i = 0; i < 100; i++) budget.deposit();
    expect(drain()).toBe(3); // saved up to the cap only
    clock.advance(500);
    expect(drain()).toBe(1); // half a second of a 2-per-second reserve
    clock.advance(10_000);
    expect(drain()).toBe(2); // the reserve never holds more than a second's worth
    expect(budget.refused).toBe(5);
    expect(() => new RetryBudget(clock, { ratio: -1 })).toThrow(/retryBudget.ratio/);
  });
});

describe('Suspicions', () => {
  it('keeps a node suspected until a probe finds it back, backing off between probes', async () => {
    const clock = new SimulatedClock(0);
    const probes: number[] = [];
    let up = false;
    const s = new Suspicions(
      clock,
      async () => {
        probes.push(clock.now());
        return up;
      },
      { probeInitialMs: 100, probeMaxMs: 400 },
    );
    s.suspect(n('a'));
    expect(s.isSuspected(n('a'))).toBe(true);
    for (let t = 0; t < 1_500; t += 50) {
      clock.advance(50);
      await flush();
    }
    // 100, then +200, +400, +400 ...
    expect(probes.slice(0, 4)).toEqual([100, 300, 700, 1100]);
    expect(s.isSuspected(n('a'))).toBe(true);
    up = true;
    clock.advance(400);
    await flush();
    expect(s.isSuspected(n('a'))).toBe(false);
  });

  it('without a probe, a suspicion lapses; a success clears it at once', () => {
    const clock = new SimulatedClock(0);
    const s = new Suspicions(clock, undefined, { probeInitialMs: 100 });
    s.suspect(n('a'));
    s.suspect(n('b'));
    s.cleared(n('b'));
    expect(s.list()).toEqual(['a']);
    clock.advance(100);
    expect(s.list()).toEqual([]);
  });
});

describe('ReplicaChoice', () => {
  const racks: Record<string, string> = { a: 'r1', b: 'r2', c: 'r2' };
  const nodes = [n('a'), n('b'), n('c')];

  it('round-robin spreads first picks evenly; suspected copies go last', () => {
    const clock = new SimulatedClock(0);
    const suspicions = new Suspicions(clock, undefined);
    const choice = new ReplicaChoice(suspicions, (x) => racks[x]);
    const firsts = new Map<string, number>();
    for (let i = 0; i < 300; i++) {
      const first = choice.order(nodes)[0]!;
      firsts.set(first, (firsts.get(first) ?? 0) + 1);
    }
    expect([...firsts.values()]).toEqual([100, 100, 100]);
    suspicions.suspect(n('a'));
    for (let i = 0; i < 6; i++) expect(choice.order(nodes).at(-1)).toBe('a');
  });

  it("asks the caller's rack first, spreading within it", () => {
    const choice = new ReplicaChoice(new Suspicions(new SimulatedClock(0), undefined), (x) => racks[x], { rack: 'r2' });
    const firsts = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const order = choice.order(nodes);
      expect(order.at(-1)).toBe('a');
      firsts.add(order[0]!);
    }
    expect([...firsts].sort()).toEqual(['b', 'c']);
  });

  it('least-outstanding asks the copy with the fewest requests in flight', () => {
    const choice = new ReplicaChoice(new Suspicions(new SimulatedClock(0), undefined), (x) => racks[x], { spread: 'least-outstanding' });
    choice.started(n('a'));
    choice.started(n('a'));
    choice.started(n('b'));
    for (let i = 0; i < 3; i++) expect(choice.order(nodes)[0]).toBe('c');
    choice.finished(n('a'));
    choice.finished(n('a'));
    choice.started(n('c'));
    expect(choice.order(nodes)[0]).toBe('a');
  });
});

describe('LatencyWindow', () => {
  it('reports the p95 of recent samples once there are enough', () => {
    const w = new LatencyWindow(100);
    for (let i = 1; i <= 19; i++) w.add(i);
    expect(w.p95()).toBeUndefined();
    for (let i = 20; i <= 100; i++) w.add(i);
    expect(w.p95()).toBe(96);
  });
});
