// Property tests over everything that reaches shardherd from outside: bus records of every kind a
// real cluster writes (mutated: fields dropped or retyped, unknown fields, truncated and huge
// arrays, wrong epochs), node and dataset configs, and the HTTP body of a dataset setup. Each is
// refused with a typed error, changes nothing, is logged and counted; nothing throws out of a
// parser or an actor.
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topicsFor, parseInboxMessage, parseRepliesMessage } from '../../src/protocol/wire.js';
import { eventsMessageReading, parseEventsMessage } from '../../src/protocol/wire-events.js';
import { runWhole } from '../../src/core/steps.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { validateDatasetConfig, type DatasetConfigInput } from '../../src/core/dataset-config.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import { NodeConfigError, parseNodeConfig } from '../../src/node/node-config.js';
import { SimDriver } from '../../src/sim/driver.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';
import type { NodeMetrics } from '../../src/metrics/node-metrics.js';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const topics = topicsFor('shardherd');
type Topic = string;
const parsers = new Map<Topic, (value: unknown) => { ok: boolean; error?: { reason: string } }>([
  [topics.inbox, parseInboxMessage],
  [topics.events, parseEventsMessage],
  [topics.replies, parseRepliesMessage],
]);
const parse = (topic: Topic, value: unknown) => parsers.get(topic)!(value);

/** One change to a JSON value at a path (indices chosen modulo what is there). */
interface Mutation {
  readonly path: readonly number[];
  readonly op: 'drop' | 'retype' | 'unknown-field' | 'truncate' | 'huge' | 'epoch';
  readonly value: Json;
  readonly n: number;
}

const mutationArb: fc.Arbitrary<Mutation> = fc.record({
  path: fc.array(fc.nat(), { maxLength: 6 }),
  op: fc.constantFrom('drop', 'retype', 'unknown-field', 'truncate', 'huge', 'epoch'),
  value: fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json>,
  n: fc.integer({ min: -3, max: 1_000_000 }),
});

/** Applies a mutation to a copy of `value`: at the end of the path, one field or element changes. */
function mutate(value: Json, m: Mutation): Json {
  const root = structuredClone(value);
  let parent: Json = root;
  for (const step of m.path) {
    const kids = childKeys(parent);
    const next = kids.length === 0 ? undefined : (parent as Record<string, Json>)[kids[step % kids.length]!];
    if (next === undefined || next === null || typeof next !== 'object') break;
    parent = next;
  }
  if (parent === null || typeof parent !== 'object') return m.value;
  const keys = childKeys(parent);
  const key = keys.length === 0 ? undefined : keys[(m.path.at(-1) ?? 0) % keys.length]!;
  const target = parent as Record<string, Json>;
  switch (m.op) {
    case 'drop':
      if (key === undefined) break;
      if (Array.isArray(parent)) parent.splice(Number(key), 1);
      else delete target[key];
      break;
    case 'retype':
      if (key !== undefined) target[key] = m.value;
      break;
    case 'unknown-field':
      if (!Array.isArray(parent)) target[`x-${Math.abs(m.n)}`] = m.value;
      break;
    case 'truncate':
      if (key !== undefined && Array.isArray(target[key])) (target[key] as Json[]).length = Math.min((target[key] as Json[]).length, Math.abs(m.n) % 2);
      else if (key !== undefined && typeof target[key] === 'string') target[key] = (target[key] as string).slice(0, Math.abs(m.n) % 3);
      break;
    case 'huge':
      if (key !== undefined && Array.isArray(target[key])) target[key] = Array.from({ length: 20_000 }, () => (target[key] as Json[])[0] ?? m.value);
      break;
    case 'epoch':
      if ('epoch' in target) target.epoch = m.n;
      break;
  }
  return root;
}

function childKeys(v: Json): string[] {
  if (v === null || typeof v !== 'object') return [];
  return Array.isArray(v) ? v.map((_, i) => String(i)) : Object.keys(v);
}

/** A real cluster on a simulated clock: the corpus of records is what it writes. */
async function startCluster() {
  const clock = new SimulatedClock(0);
  const cluster = new EmbeddedCluster({
    name: 'fuzz',
    clock,
    nodes: [
      { name: 'n1', rack: 'A' },
      { name: 'n2', rack: 'B' },
      { name: 'n3', rack: 'C' },
    ],
    metaStore: new MemoryMetaStore(),
    log: pino({ level: 'silent' }),
    sessionTimeoutMs: 1_000,
    heartbeatIntervalMs: 250,
    settings: { publishIntervalMs: 1_000, recoveryReplyTimeoutMs: 500, pollIntervalMs: 250, reportResendMs: 500, retryInitialMs: 50, retryMaxMs: 400 },
  });
  const driver = new SimDriver(cluster);
  await cluster.startNodes();
  await driver.advance(500);
  for (const config of [
    { ref: 'alpha', numShards: 8, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 20 } },
    { ref: 'gamma', numShards: 8, minNumNodes: 1, replicationFactor: 2, strategy: 'balanced', source: { type: 'synthetic', recordsPerSecond: 20 } },
  ] satisfies DatasetConfigInput[]) {
    const reply = cluster.setupDataset(config, 5_000);
    await driver.advance(200);
    expect((await reply).type).toBe('DatasetVerified');
  }
  await driver.advance(2_000);
  return { cluster, driver, clock };
}

describe('fuzzed bus records', () => {
  let env: Awaited<ReturnType<typeof startCluster>>;
  let corpus: { topic: Topic; value: Json }[];

  beforeAll(async () => {
    env = await startCluster();
    // A dataset set up and removed, so the corpus holds the removal's message to every node.
    const setUp = env.cluster.setupDataset({ ref: 'delta', numShards: 2, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 20 } }, 5_000);
    await env.driver.advance(500);
    expect((await setUp).type).toBe('DatasetVerified');
    const removed = env.cluster.request((replyTo) => ({ type: 'RemoveDataset', dataset: 'delta' as never, replyTo }), 5_000);
    await env.driver.advance(500);
    expect((await removed).type).toBe('Success');
    // A failover too, so the corpus holds recovery's records (cluster-state request and answers).
    const crashed = (await env.cluster.singletonNode())!;
    crashed.crash();
    await env.driver.advance(4_000);
    // And a node back as a new incarnation, for the change of the members it makes.
    await crashed.start();
    await env.driver.advance(2_000);
    corpus = [...parsers.keys()].flatMap((topic) => env.cluster.bus.topic(topic).map((r) => ({ topic, value: r.value as Json })));
    const kinds = new Set(corpus.map((c) => `${c.topic} ${(c.value as { kind: string }).kind}`));
    // Every kind of record there is, so each gets mutated.
    expect([...kinds].sort()).toEqual(
      ['ack', 'reply']
        .map((k) => `${topics.replies} ${k}`)
        .concat(
          ['cluster-state-request', 'digest', 'fence', 'map-changes', 'map-snapshot', 'members', 'members-change', 'publish']
            .map((k) => `${topics.events} ${k}`)
            .filter((k) => !k.endsWith('fence') || kinds.has(k)),
        )
        .concat(['cluster-state', 'report', 'request', 'takeover'].map((k) => `${topics.inbox} ${k}`))
        .sort(),
    );
  }, 60_000);

  afterAll(async () => {
    await env?.cluster.stop();
  });

  it('the parsers never throw: each record is read or refused with a reason, whole or in steps alike', () => {
    fc.assert(
      fc.property(fc.nat(), mutationArb, fc.boolean(), (pick, m, raw) => {
        const sample = corpus[pick % corpus.length]!;
        const value = raw ? m.value : mutate(sample.value, m);
        const r = parse(sample.topic, value);
        if (!r.ok) expect(r.error?.reason).toMatch(/\S/);
        // Read in steps (as a node on real time does), an events record reads the same.
        if (sample.topic === topics.events) expect(runWhole(eventsMessageReading(value))).toEqual(r);
      }),
      { numRuns: 3_000, seed: 1 },
    );
  });

  it('records the parsers refuse change nothing in a running cluster, are logged and counted, and crash no actor', async () => {
    const { cluster, driver } = env;
    const metaStore = cluster.services.metaStore;
    const before = { lease: await metaStore.readLease(), maps: JSON.stringify(await metaStore.shardMaps()), ops: await metaStore.nodeOperations() };
    const refused = new Map<Topic, number>([...parsers.keys()].map((t) => [t, 0]));
    const samples = fc.sample(fc.tuple(fc.nat(), mutationArb, fc.boolean()), { numRuns: 400, seed: 2 });
    for (const [pick, m, raw] of samples) {
      const sample = corpus[pick % corpus.length]!;
      const value = raw ? m.value : mutate(sample.value, m);
      if (parse(sample.topic, value).ok) continue;
      refused.set(sample.topic, refused.get(sample.topic)! + 1);
      await cluster.bus.produce(sample.topic, value);
    }
    await driver.advance(2_000);
    expect(refused.get(topics.inbox)).toBeGreaterThan(50);
    expect(refused.get(topics.events)).toBeGreaterThan(50);
    expect(await metaStore.readLease()).toEqual(before.lease);
    expect(JSON.stringify(await metaStore.shardMaps())).toBe(before.maps);
    expect(await metaStore.nodeOperations()).toEqual(before.ops);
    const live = cluster.nodes.filter((n) => n.state === 'running');
    expect(live.map((n) => n.node).sort()).toEqual(
      cluster.nodes
        .filter((n) => n.state !== 'crashed')
        .map((n) => n.node)
        .sort(),
    );
    for (const n of live) expect(n.actors?.crashes, `${n.node}'s actors`).toBe(0);
    // Counted: the singleton counts the inbox's, every node the events' and replies'.
    const counted = async (topic: string) => {
      let total = 0;
      for (const n of live)
        total +=
          (await (n.metrics as NodeMetrics).registry.getSingleMetric('shardherd_bus_malformed_records_total')!.get()).values.find(
            (v) => v.labels.topic === topic,
          )?.value ?? 0;
      return total;
    };
    expect(await counted(topics.inbox)).toBe(refused.get(topics.inbox));
    expect(await counted(topics.events)).toBe(refused.get(topics.events)! * live.length);
  }, 120_000);

  it('records the parsers accept, however odd, crash no actor and leave the singleton in place', async () => {
    const { cluster, driver } = env;
    const lease = await cluster.services.metaStore.readLease();
    let accepted = 0;
    for (const [pick, m] of fc.sample(fc.tuple(fc.nat(), mutationArb), { numRuns: 400, seed: 3 })) {
      const sample = corpus[pick % corpus.length]!;
      const value = mutate(sample.value, m);
      // A fence or release is obeyed by its node (that is their job): not part of this property.
      const kind = (value as { kind?: unknown } | null)?.kind;
      if (!parse(sample.topic, value).ok || kind === 'fence' || kind === 'release') continue;
      accepted += 1;
      await cluster.bus.produce(sample.topic, value);
    }
    await driver.advance(3_000);
    expect(accepted).toBeGreaterThan(100);
    expect((await cluster.services.metaStore.readLease())?.epoch).toBe(lease?.epoch);
    for (const n of cluster.nodes.filter((x) => x.state === 'running')) expect(n.actors?.crashes, `${n.node}'s actors`).toBe(0);
  }, 120_000);
});

describe('fuzzed configs', () => {
  it('a dataset config is validated or refused with a message, never thrown', () => {
    const valid = {
      ref: 'metrics',
      numShards: 8,
      minNumNodes: 2,
      replicationFactor: 2,
      strategy: 'balanced',
      source: { type: 'kafka', topic: 'metrics' },
    } as Json;
    fc.assert(
      fc.property(mutationArb, fc.boolean(), (m, raw) => {
        const r = validateDatasetConfig(raw ? m.value : mutate(valid, m));
        if (!r.ok) expect(r.error.message).toMatch(/\S/);
      }),
      { numRuns: 2_000, seed: 4 },
    );
  });

  it('a node config is read or refused with a NodeConfigError naming the key, nothing else thrown', () => {
    const valid = JSON.parse(readFileSync(new URL('../../config/node.example.json', import.meta.url), 'utf8')) as Json;
    expect(() => parseNodeConfig(valid)).not.toThrow();
    fc.assert(
      fc.property(mutationArb, fc.boolean(), (m, raw) => {
        try {
          parseNodeConfig(raw ? m.value : mutate(valid, m));
        } catch (e) {
          expect(e).toBeInstanceOf(NodeConfigError);
          expect((e as Error).message).toMatch(/^config: /);
        }
      }),
      { numRuns: 2_000, seed: 5 },
    );
  });
});

describe('fuzzed POST /datasets bodies', () => {
  let cluster: EmbeddedCluster;
  let api: NodeApi;

  beforeAll(async () => {
    cluster = new EmbeddedCluster({ name: 'fuzz-http', nodes: [{ name: 'n1' }], log: pino({ level: 'silent' }) });
    await cluster.start();
    api = await startNodeApi(cluster.node('n1'), { port: 0, token: 'secret', singletonTimeoutMs: 2_000 });
  });

  afterAll(async () => {
    await api?.close();
    await cluster?.stop();
  });

  it('a body that is not a dataset config gets 400 with a typed error, and no dataset appears', async () => {
    const valid = { ref: 'metrics', numShards: 4, minNumNodes: 1, source: { type: 'synthetic' } } as Json;
    const bodies = fc
      .sample(fc.tuple(mutationArb, fc.boolean()), { numRuns: 150, seed: 6 })
      .map(([m, raw]) => (raw ? m.value : mutate(valid, m)))
      .filter((body) => !validateDatasetConfig(body).ok);
    expect(bodies.length).toBeGreaterThan(60);
    for (const body of bodies) {
      const res = await fetch(`${api.url}/api/v1/datasets`, {
        method: 'POST',
        headers: { authorization: 'Bearer secret', 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(res.status, JSON.stringify(body).slice(0, 200)).toBe(400);
      const answer = (await res.json()) as { error?: unknown; reason?: unknown };
      expect(typeof answer.error).toBe('string');
      expect(answer.reason).toMatch(/\S/);
    }
    const list = (await (await fetch(`${api.url}/api/v1/datasets`)).json()) as { datasets?: unknown[] } | unknown[];
    expect(Array.isArray(list) ? list : list.datasets).toEqual([]);
  }, 60_000);
});
