// `/metrics` of a running node, parsed with a real Prometheus text-format parser: the names follow
// Prometheus's conventions and the values say what the cluster is doing.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import parsePrometheusTextFormat, { type ParsedFamily } from 'parse-prometheus-text-format';
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import type { SimDriver } from '../../src/sim/driver.js';
import { simulatedCluster } from '../support/live-cluster.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import { datasetRef } from '../../src/core/ids.js';

let cluster: EmbeddedCluster;
let driver: SimDriver;
const apis: NodeApi[] = [];

/** A request to a node's API, answered as the driver moves the cluster's time. */
const request = (url: string, init?: RequestInit) => driver.whenSettled(fetch(url, init));

async function scrape(api: NodeApi): Promise<Map<string, ParsedFamily>> {
  const res = await request(`${api.url}/metrics`);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return new Map(parsePrometheusTextFormat(await res.text()).map((f) => [f.name, f]));
}

const value = (families: Map<string, ParsedFamily>, name: string, labels: Record<string, string> = {}): number | undefined => {
  const sample = families.get(name)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return sample?.value === undefined ? undefined : Number(sample.value);
};
const sum = (families: Map<string, ParsedFamily>, name: string) => (families.get(name)?.metrics ?? []).reduce((n, m) => n + Number(m.value), 0);

beforeAll(async () => {
  // Shard 3's record 20 cannot be read: the shard errors and the singleton moves it once.
  ({ cluster, driver } = simulatedCluster('metrics', ['n1', 'n2', 'n3'], {
    source: { failAt: (_ds, shard, offset) => (shard === 3 && offset === 20 ? 'poison record' : undefined) },
  }));
  await driver.whenSettled(cluster.start());
  await driver.whenSettled(cluster.setupDataset({ ref: 'metrics', numShards: 8, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 500 } }));
  for (const n of ['n1', 'n2']) apis.push(await startNodeApi(cluster.node(n), { port: 0, token: 'metrics-test-token-1234' }));
  await driver.advance(2_500);
});

afterAll(async () => {
  for (const api of apis) await api.close();
  await cluster?.stop();
});

describe('GET /metrics', () => {
  it('uses Prometheus naming: the shardherd_ prefix, _total on counters, units in the name', async () => {
    const families = await scrape(apis[0]!);
    const ours = [...families.values()].filter((f) => !f.name.startsWith('shardherd_process_'));
    expect(ours.length).toBeGreaterThanOrEqual(15);
    for (const f of ours) {
      expect(f.name).toMatch(/^shardherd_[a-z_]+$/);
      expect(f.help.length).toBeGreaterThan(10);
      if (f.type === 'COUNTER') expect(f.name).toMatch(/_total$/);
      else expect(f.name).not.toMatch(/_total$/);
    }
    expect(families.get('shardherd_singleton_recovery_duration_seconds')?.type).toBe('HISTOGRAM');
  });

  it('tells the map, the singleton, the membership and the failovers as the cluster sees them', async () => {
    const singleton = await scrape(apis[0]!);
    const other = await scrape(apis[1]!);
    for (const f of [singleton, other]) {
      expect(value(f, 'shardherd_map_epoch', { dataset: 'metrics' })).toBe(1);
      expect(value(f, 'shardherd_membership_size')).toBe(3);
      const shards = f.get('shardherd_shards')!.metrics.filter((m) => m.labels?.dataset === 'metrics');
      expect(shards.reduce((n, m) => n + Number(m.value), 0)).toBe(8);
      // The poisoned shard ends without an owner (Error, in its cooldown); every other shard has one copy.
      const ownerless = ['Error', 'Down', 'Stopped', 'Unassigned'].reduce((n, status) => n + value(f, 'shardherd_shards', { dataset: 'metrics', status })!, 0);
      expect(sum(f, 'shardherd_shard_assignments')).toBe(8 - ownerless);
    }
    expect(value(singleton, 'shardherd_is_singleton')).toBe(1);
    expect(value(other, 'shardherd_is_singleton')).toBe(0);
    expect(value(singleton, 'shardherd_singleton_failovers_total')).toBe(1);
    expect(Number(singleton.get('shardherd_singleton_recovery_duration_seconds')!.metrics[0]!.count)).toBe(1);
    expect(value(other, 'shardherd_singleton_failovers_total')).toBe(0);
  });

  it('counts the reassignment of an errored shard on the singleton', async () => {
    const singleton = await scrape(apis[0]!);
    expect(value(singleton, 'shardherd_shard_reassignments_total', { dataset: 'metrics' })).toBeGreaterThanOrEqual(1);
  });

  it('counts ingested records and reports a lag per shard the node runs', async () => {
    const running = await cluster.node('n2').running();
    expect(running.length).toBeGreaterThan(0);
    const f = await scrape(apis[1]!);
    const records = f.get('shardherd_ingested_records_total')!.metrics;
    expect(records.reduce((n, m) => n + Number(m.value), 0)).toBeGreaterThan(0);
    const lagged = new Set(f.get('shardherd_ingestion_lag_records')!.metrics.map((m) => Number(m.labels!.shard)));
    for (const r of running.filter((x) => x.status.type !== 'Error')) expect(lagged.has(r.shard), `lag of shard ${r.shard}`).toBe(true);
    for (const m of f.get('shardherd_ingestion_lag_records')!.metrics) expect(Number(m.value)).toBeGreaterThanOrEqual(0);
  });
});

describe('GET /metrics series', () => {
  it('start at 0 for every label set known in advance, before anything happened', async () => {
    const f = await scrape(apis[1]!); // not the singleton's node: it reassigned nothing
    expect(value(f, 'shardherd_shard_reassignments_total', { dataset: 'metrics' })).toBe(0);
    expect(value(f, 'shardherd_shard_cooldown_refusals_total', { dataset: 'metrics' })).toBe(0);
    for (const operation of ['produce', 'handle']) expect(value(f, 'shardherd_bus_errors_total', { operation }), operation).toBe(0);
    const topics = f
      .get('shardherd_bus_malformed_records_total')!
      .metrics.map((m) => m.labels!.topic)
      .sort();
    expect(topics.map((t) => t!.replace(/^.*\./, ''))).toEqual(['endpoints', 'events', 'inbox', 'replies']);
    for (const operation of ['putShardMap', 'takeLease', 'writeCheckpoint', 'readCheckpointsOf'])
      expect(value(f, 'shardherd_metastore_errors_total', { operation }), operation).toBe(0);
  });

  it('say which version each node runs', async () => {
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    for (const [i, api] of apis.entries()) {
      const info = (await scrape(api)).get('shardherd_build_info')!;
      expect(info.type).toBe('GAUGE');
      expect(info.metrics).toEqual([{ labels: { version, node: ['n1', 'n2'][i] }, value: '1' }]);
    }
  });

  it('of a shard go from a node once the shard moved away from it', async () => {
    const n2 = cluster.node('n2');
    const shard = (await n2.running()).find((r) => r.dataset === 'metrics' && r.status.type === 'Active')!.shard;
    const before = await scrape(apis[1]!);
    expect(value(before, 'shardherd_ingested_records_total', { dataset: 'metrics', shard: String(shard) })).toBeGreaterThan(0);
    const stop = await request(`${apis[0]!.url}/api/v1/cluster/metrics/stopshards`, {
      method: 'POST',
      headers: { authorization: 'Bearer metrics-test-token-1234', 'content-type': 'application/json' },
      body: JSON.stringify({ shardList: [shard] }),
    });
    expect(stop.status).toBe(200);
    await driver.until(async () => !(await n2.running()).some((r) => r.dataset === 'metrics' && r.shard === shard), 10_000, 50);
    const after = await scrape(apis[1]!);
    expect(value(after, 'shardherd_ingested_records_total', { dataset: 'metrics', shard: String(shard) })).toBeUndefined();
    expect(value(after, 'shardherd_ingestion_lag_records', { dataset: 'metrics', shard: String(shard) })).toBeUndefined();
    // The shards it still runs keep theirs.
    for (const r of (await n2.running()).filter((x) => x.dataset === 'metrics')) {
      expect(value(after, 'shardherd_ingested_records_total', { dataset: 'metrics', shard: String(r.shard) }), `shard ${r.shard}`).toBeGreaterThanOrEqual(0);
    }
  });
});

describe('GET /metrics after a dataset is removed', () => {
  it('no longer has any series of the dataset, counters included, on any node', async () => {
    const res = await request(`${apis[0]!.url}/api/v1/datasets/metrics`, { method: 'DELETE', headers: { authorization: 'Bearer metrics-test-token-1234' } });
    expect(res.status).toBe(200);
    await driver.advance(1_500);
    for (const api of apis) {
      const families = await scrape(api);
      const left = [...families.values()].flatMap((f) => f.metrics.filter((m) => m.labels?.dataset === 'metrics').map(() => f.name));
      expect(left).toEqual([]);
      expect(value(families, 'shardherd_membership_size')).toBe(3);
    }
  });
});

describe('GET /metrics of a load-aware dataset', () => {
  it("gives, on the singleton's node only, each member's load over its weighted share once the load view is complete", async () => {
    const hot = {
      ref: 'hot',
      numShards: 8,
      minNumNodes: 1,
      strategy: 'balanced' as const,
      loadBalance: {},
      source: { type: 'synthetic' as const, recordsPerSecond: 100 },
    };
    await driver.whenSettled(cluster.setupDataset(hot));
    const ratiosOf = (f: Map<string, ParsedFamily>, dataset: string) =>
      (f.get('shardherd_load_node_ratio')?.metrics ?? []).filter((m) => m.labels?.dataset === dataset);
    // No load report yet: the view is incomplete, so no figure.
    expect(ratiosOf(await scrape(apis[0]!), 'hot')).toEqual([]);
    await driver.advance(25_000);
    const singleton = await scrape(apis[0]!);
    expect(singleton.get('shardherd_load_node_ratio')?.type).toBe('GAUGE');
    const ratios = new Map(ratiosOf(singleton, 'hot').map((m) => [m.labels!.node!, Number(m.value)]));
    expect([...ratios.keys()].sort()).toEqual(['n1', 'n2', 'n3']);
    // Each member's load as the singleton's dry run counts it, over the mean (every weight is 1).
    const reply = await driver.whenSettled(cluster.request((replyTo) => ({ type: 'ExplainPlacement', dataset: datasetRef('hot'), replyTo })));
    if (reply.type !== 'PlacementExplanation') throw new Error(`expected an explanation, got ${reply.type}`);
    const mean = reply.explanation.nodes.reduce((a, n) => a + n.load, 0) / reply.explanation.nodes.length;
    for (const n of reply.explanation.nodes) expect(ratios.get(n.node), n.node).toBeCloseTo(n.load / mean, 6);
    // None for a dataset placed by copy counts, none on a node that does not host the singleton.
    expect(ratiosOf(singleton, 'metrics')).toEqual([]);
    expect(ratiosOf(await scrape(apis[1]!), 'hot')).toEqual([]);
  });
});
