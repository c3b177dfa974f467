// Routed requests carried by the library, over real HTTP on 127.0.0.1: an embedded cluster of four
// nodes in racks a, b, c, c serving a dataset of 16 shards, and a client that is not a member.
// A crash of the node serving the most shards fails no request at RF 2, and only the dead node's
// shards (typed, within the deadline) at RF 1; a drain fails none; bad input gets typed errors within
// deadlines; a slow handler still answers; requests in flight are bounded at the client and the node.
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ShardherdClient } from '../../src/client/shardherd-client.js';
import { ShardherdClientError } from '../../src/client/client-errors.js';
import type { DatasetRef, NodeId } from '../../src/core/ids.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import type { ShardherdNode } from '../../src/actors/node-process.js';
import type { FailureDetectorOptions } from '../../src/cluster/failure-detector/settings.js';

const ds = 'routed' as DatasetRef;
const NUM_SHARDS = 16;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let cluster: EmbeddedCluster | undefined;
let client: ShardherdClient | undefined;
/** Clients a test connects besides the cluster's own, closed after it. */
const others: ShardherdClient[] = [];
afterEach(async () => {
  for (const other of others.splice(0)) await other.close();
  await client?.close();
  await cluster?.stop();
  client = undefined;
  cluster = undefined;
});

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

type Answer = { node: string; shard: number };

/** One more client of the embedded cluster, closed after the test. */
async function anotherClient(c: EmbeddedCluster, options: Parameters<typeof ShardherdClient.connectEmbedded>[1]): Promise<ShardherdClient> {
  const cl = await ShardherdClient.connectEmbedded(c, options);
  others.push(cl);
  return cl;
}

async function servingCluster(
  rf: number,
  serveOptions: { maxInFlight?: number } = {},
  failureDetector?: FailureDetectorOptions,
): Promise<{ cluster: EmbeddedCluster; client: ShardherdClient }> {
  const c = new EmbeddedCluster({
    name: `routed-${rf}-${Math.floor(performance.now() * 1000)}`,
    nodes: [
      { name: 'a', rack: 'a' },
      { name: 'b', rack: 'b' },
      { name: 'c1', rack: 'c' },
      { name: 'c2', rack: 'c' },
    ],
    log: pino({ level: 'silent' }),
    sessionTimeoutMs: 1_500,
    heartbeatIntervalMs: 250,
    settings: {
      publishIntervalMs: 500,
      reportResendMs: 500,
      recoveryReplyTimeoutMs: 500,
      pollIntervalMs: 100,
      ...(failureDetector ? { failureDetector } : {}),
    },
  });
  cluster = c;
  for (const node of c.nodes) {
    await node.serve<{ kind?: string }, Answer>(
      ds,
      async ({ shard, payload, signal }) => {
        if (payload?.kind === 'throw') throw new RangeError('the handler refused');
        if (payload?.kind === 'hang') await new Promise((resolve) => signal.addEventListener('abort', resolve));
        if (payload?.kind === 'slow') await sleep(1_200);
        return { node: node.node, shard };
      },
      serveOptions,
    );
  }
  await c.start();
  const reply = await c.setupDataset(
    { ref: ds, numShards: NUM_SHARDS, minNumNodes: 4, replicationFactor: rf, strategy: 'balanced', source: { type: 'synthetic', recordsPerSecond: 10 } },
    10_000,
  );
  expect(reply.type).toBe('DatasetVerified');
  const cl = await ShardherdClient.connectEmbedded(c, { name: 'test', deadlineMs: 3_000, attemptTimeoutMs: 500 });
  client = cl;
  await until('every shard served by RF copies in the client map', () => {
    const map = cl.map(ds);
    return map !== undefined && Array.from({ length: NUM_SHARDS }, (_, s) => map.servingNodes(s).length).every((n) => n === rf);
  });
  // Endpoints: one request per shard reaches a handler.
  for (let s = 0; s < NUM_SHARDS; s++) await cl.request(ds, { shard: s }, {});
  return { cluster: c, client: cl };
}

function busiest(c: EmbeddedCluster, cl: ShardherdClient): ShardherdNode {
  const map = cl.map(ds)!;
  const count = new Map<string, number>();
  for (let s = 0; s < NUM_SHARDS; s++) for (const n of map.servingNodes(s)) count.set(n, (count.get(n) ?? 0) + 1);
  const [name] = [...count].sort((x, y) => y[1] - x[1])[0]!;
  return c.node(name);
}

interface Load {
  ok: number;
  failures: { shard: number; error: unknown; ms: number }[];
  servedBy: Map<string, number>;
  stop: () => Promise<void>;
}

/** Four loops of requests to random shards until stopped. */
function load(cl: ShardherdClient): Load {
  const state: Load = { ok: 0, failures: [], servedBy: new Map(), stop: async () => {} };
  let running = true;
  const worker = async () => {
    while (running) {
      const shard = Math.floor(Math.random() * NUM_SHARDS);
      const t0 = Date.now();
      try {
        const a = await cl.request<Answer>(ds, { shard }, { q: 1 });
        expect(a.shard).toBe(shard);
        state.ok++;
        state.servedBy.set(a.node, (state.servedBy.get(a.node) ?? 0) + 1);
      } catch (e) {
        state.failures.push({ shard, error: e, ms: Date.now() - t0 });
        await sleep(5);
      }
    }
  };
  const workers = [worker(), worker(), worker(), worker()];
  state.stop = async () => {
    running = false;
    await Promise.all(workers);
  };
  return state;
}

describe('routed requests on an embedded cluster', () => {
  it('RF 2: a crash of the node serving the most shards fails no request, and reads spread over both copies', async () => {
    const { cluster: c, client: cl } = await servingCluster(2);
    const victim = busiest(c, cl);
    const l = load(cl);
    await sleep(500);
    const before = new Map(l.servedBy);
    victim.crash();
    // Past the session timeout: the map drops the dead node and places new copies.
    await sleep(3_500);
    await l.stop();
    expect(l.failures.map((f) => String(f.error))).toEqual([]);
    expect(l.ok).toBeGreaterThan(200);
    // Every node served reads before the crash (spread over the copies, not the first copy only).
    for (const n of c.nodes) expect(before.get(n.node) ?? 0).toBeGreaterThan(0);
    expect(cl.map(ds)!.servingNodes(0)).not.toContain(victim.node);
  }, 30_000);

  // Seen on real processes (heartbeat mode): a node answered NotServing as soon as its write lease
  // lapsed, and when the singleton's host died every node's lease lapsed until a successor took
  // over (its whole lease, then a recovery): every shard failed for 5 s at RF 2 and RF 3, not only
  // the dead node's. Reads do not need the singleton: a lapse pauses writes, not answers.
  it("heartbeat mode, RF 2: a crash of the singleton's host fails no request while a successor takes over", async () => {
    const { cluster: c, client: cl } = await servingCluster(
      2,
      {},
      { mode: 'heartbeat', heartbeatIntervalMs: 100, suspicionTimeoutMs: 1_800, leaseMs: 500, singletonLeaseMs: 2_000 },
    );
    const host = (await c.singletonNode())!;
    const l = load(cl);
    await sleep(500);
    host.crash();
    await until('a successor took over', async () => (await c.singletonNode()) !== undefined && (await c.singletonNode()) !== host, 15_000);
    await sleep(1_000);
    await l.stop();
    expect(l.failures.map((f) => String(f.error))).toEqual([]);
    expect(l.ok).toBeGreaterThan(200);
  }, 40_000);

  it("RF 1: only the dead node's shards fail, typed and within their deadline, until they are served elsewhere", async () => {
    const { cluster: c, client: cl } = await servingCluster(1);
    const victim = busiest(c, cl);
    const map = cl.map(ds)!;
    const deadShards = new Set(Array.from({ length: NUM_SHARDS }, (_, s) => s).filter((s) => map.servingNodes(s).includes(victim.node)));
    const l = load(cl);
    await sleep(300);
    victim.crash();
    await until(
      "the dead node's shards served elsewhere",
      () => [...deadShards].every((s) => (cl.map(ds)!.servingNodes(s)[0] ?? victim.node) !== victim.node),
      15_000,
    );
    await sleep(300);
    const failedBefore = l.failures.length;
    await sleep(500);
    await l.stop();
    for (const f of l.failures) {
      expect(deadShards.has(f.shard)).toBe(true);
      expect(f.error).toBeInstanceOf(ShardherdClientError);
      // Unavailable (every try refused, or the retry budget spent) or past the deadline: never later than it.
      expect(['SHARD_UNAVAILABLE', 'DEADLINE_EXCEEDED']).toContain((f.error as ShardherdClientError).code);
      expect(f.ms).toBeLessThan(3_000 + 300);
    }
    // Once served elsewhere, they succeed again.
    expect(l.failures.length).toBe(failedBefore);
  }, 30_000);

  it('a drain fails no request at RF 2', async () => {
    const { cluster: c, client: cl } = await servingCluster(2);
    const drained = busiest(c, cl);
    const l = load(cl);
    await sleep(300);
    const reply = await c.request((replyTo) => ({ type: 'RemoveNode', node: drained.node, replyTo }) as never, 5_000);
    expect(reply.type).toBe('NodeOperationAccepted');
    await until('the drain done', () => drained.isDrained, 20_000);
    await sleep(300);
    await l.stop();
    expect(l.failures.map((f) => String(f.error))).toEqual([]);
    for (let s = 0; s < NUM_SHARDS; s++) expect(cl.map(ds)!.servingNodes(s)).not.toContain(drained.node);
  }, 40_000);

  it('bad input gets typed errors, nothing hangs past its deadline', async () => {
    const { cluster: c, client: cl } = await servingCluster(2);
    const code = async (p: Promise<unknown>) => {
      try {
        await p;
      } catch (e) {
        expect(e).toBeInstanceOf(ShardherdClientError);
        return (e as ShardherdClientError).code;
      }
      return 'no error';
    };
    expect(await code(cl.request('nosuch' as DatasetRef, { shard: 0 }, {}))).toBe('UNKNOWN_DATASET');
    expect(await code(cl.request(ds, { shard: NUM_SHARDS }, {}))).toBe('SHARD_OUT_OF_RANGE');
    expect(await code(cl.request(ds, { shard: 1 }, { n: 1n }))).toBe('NOT_SERIALIZABLE');
    expect(await code(cl.request(ds, { shard: 1 }, { kind: 'throw' }))).toBe('HANDLER_FAILED');
    const t0 = Date.now();
    expect(await code(cl.request(ds, { shard: 1 }, { kind: 'hang' }, { deadlineMs: 800 }))).toBe('DEADLINE_EXCEEDED');
    expect(Date.now() - t0).toBeLessThan(1_500);
    // Deadlines that cannot be waited for: refused before anything is sent (a timer beyond ~24.8
    // days would fire at once).
    for (const deadlineMs of [-5, 0, Number.NaN, Number.POSITIVE_INFINITY, 1e12]) {
      expect(await code(cl.request(ds, { shard: 1 }, {}, { deadlineMs })), `deadlineMs ${deadlineMs}`).toBe('INVALID_OPTION');
    }
    await expect(ShardherdClient.connectEmbedded(c, { deadlineMs: 1e12 })).rejects.toThrow(/deadlineMs must be a positive number/);
    await expect(c.node('a').serve(ds, () => null, { maxInFlight: 0 })).rejects.toThrow(/maxInFlight must be a whole number >= 1/);
    // A fan-out over every shard: answers merged, each shard once.
    const all = await cl.fanOut<Answer>(ds, { shardKey: { _ws_: 'w', _ns_: 'n' }, spread: 4 }, {});
    expect(all.errors).toEqual([]);
    expect(all.values.map((v) => v.shard).sort((x, y) => x - y)).toEqual(Array.from({ length: NUM_SHARDS }, (_, s) => s));
    // A client pointed at another prefix finds no cluster: typed, within its connect timeout.
    const t1 = Date.now();
    await expect(ShardherdClient.connect({ bus: c.bus, topicPrefix: 'elsewhere', connectTimeoutMs: 500 })).rejects.toMatchObject({ code: 'CONNECT_FAILED' });
    expect(Date.now() - t1).toBeLessThan(1_500);
    // Nothing changed in the cluster: the client never joined it.
    expect(
      c.membership
        .view()
        .members.map((m) => m.node as NodeId)
        .sort(),
    ).toEqual(['a', 'b', 'c1', 'c2']);
  }, 30_000);

  it('a slow handler still answers: the deadline is the only give-up time (RF 2, 1200 ms handler, 1000 ms attempts)', async () => {
    const { cluster: c } = await servingCluster(2);
    const cl = await anotherClient(c, { name: 'slow' });
    await cl.whenServed(ds);
    const t0 = Date.now();
    const answers = await Promise.all([0, 5, 9].map((shard) => cl.request<Answer>(ds, { shard }, { kind: 'slow' }, { deadlineMs: 5_000 })));
    expect(answers.map((a) => a.shard)).toEqual([0, 5, 9]);
    // The first copy's answer, not a second 1200 ms after the attempt timer.
    expect(Date.now() - t0).toBeLessThan(2_000);
  }, 30_000);

  it('bounds requests in flight: one more than maxInFlight is refused at once, typed; the others are answered', async () => {
    const { cluster: c } = await servingCluster(2);
    const cl = await anotherClient(c, { name: 'bounded', maxInFlight: 4 });
    await cl.whenServed(ds);
    const outcomes = await Promise.all(
      Array.from({ length: 10 }, (_, i) => {
        const t0 = Date.now();
        return cl.request<Answer>(ds, { shard: i }, { kind: 'slow' }).then(
          () => ({ ok: true as const, ms: Date.now() - t0 }),
          (e: unknown) => ({ ok: false as const, code: (e as ShardherdClientError).code, ms: Date.now() - t0 }),
        );
      }),
    );
    expect(outcomes.filter((o) => o.ok)).toHaveLength(4);
    const refused = outcomes.filter((o) => !o.ok);
    expect(refused.map((o) => o.code)).toEqual(Array(6).fill('OVERLOADED'));
    for (const o of refused) expect(o.ms).toBeLessThan(100);
    // The bound frees as requests end.
    expect((await cl.request<Answer>(ds, { shard: 1 }, {})).shard).toBe(1);
  }, 30_000);

  it('a node running maxInFlight requests answers one more as overloaded, and the client asks the other copy', async () => {
    const { client: cl } = await servingCluster(2, { maxInFlight: 1 });
    await cl.whenServed(ds);
    const [first, second] = cl.map(ds)!.servingNodes(3);
    const answers = await Promise.all([0, 1].map(() => cl.request<Answer>(ds, { shard: 3 }, { kind: 'slow' }, { deadlineMs: 5_000 })));
    // Both answered: one by each copy, since each node runs one at a time.
    expect(answers.map((a) => a.node).sort()).toEqual([first, second].sort());
  }, 30_000);

  it('whenServed resolves once every shard has a reachable serving copy, and names the shards that have none', async () => {
    const { cluster: c } = await servingCluster(2);
    const cl = await anotherClient(c, { name: 'ready' });
    await cl.whenServed(ds, { deadlineMs: 5_000 });
    const map = cl.map(ds)!;
    for (let s = 0; s < NUM_SHARDS; s++) expect(map.servingNodes(s).length).toBeGreaterThan(0);
    // Right after it resolves, a request to every shard answers at once.
    const t0 = Date.now();
    for (let s = 0; s < NUM_SHARDS; s++) expect((await cl.request<Answer>(ds, { shard: s }, {})).shard).toBe(s);
    expect(Date.now() - t0).toBeLessThan(2_000);
    await expect(cl.whenServed('nosuch' as DatasetRef, { deadlineMs: 1_000 })).rejects.toMatchObject({ code: 'UNKNOWN_DATASET' });
  }, 30_000);

  it('a client closed while requests are in flight ends them at once with CLOSED, and refuses new ones', async () => {
    const { cluster: c } = await servingCluster(2);
    const cl = await anotherClient(c, { name: 'closing', deadlineMs: 10_000 });
    await cl.whenServed(ds);
    const t0 = Date.now();
    const hanging = Promise.all(
      [0, 1, 2].map((shard) =>
        cl.request(ds, { shard }, { kind: 'hang' }).then(
          () => 'answered',
          (e: unknown) => (e as ShardherdClientError).code,
        ),
      ),
    );
    await sleep(200);
    await cl.close();
    expect(await hanging).toEqual(['CLOSED', 'CLOSED', 'CLOSED']);
    expect(Date.now() - t0).toBeLessThan(2_000);
    await expect(cl.request(ds, { shard: 0 }, {})).rejects.toMatchObject({ code: 'CLOSED' });
  }, 30_000);
});
