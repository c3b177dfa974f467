// The Grafana dashboard of config/grafana: every query names metrics a node exports (with the
// suffixes Prometheus gives a histogram's series) and filters on labels those metrics have, so a
// renamed metric or label breaks this test rather than a panel nobody looks at until an incident.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { simulatedCluster } from '../support/live-cluster.js';
import type { NodeMetrics } from '../../src/metrics/node-metrics.js';

interface Panel {
  readonly title: string;
  readonly targets?: readonly { readonly expr: string }[];
}

const dashboard = JSON.parse(readFileSync(new URL('../../config/grafana/shardherd-dashboard.json', import.meta.url), 'utf8')) as {
  panels: Panel[];
  templating: { list: { name: string; definition?: string }[] };
};

/** Every series name a node exports, with the label names each may carry. */
type Exported = Map<string, Set<string>>;

let cluster: EmbeddedCluster;
let exported: Exported;

beforeAll(async () => {
  const simulated = simulatedCluster('grafana', ['n1', 'n2']);
  cluster = simulated.cluster;
  const { driver } = simulated;
  await driver.whenSettled(cluster.start());
  await driver.whenSettled(cluster.setupDataset({ ref: 'metrics', numShards: 4, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 100 } }));
  await driver.whenSettled(cluster.whenConverged('metrics', { timeoutMs: 10_000 }));
  exported = new Map();
  for (const metric of (cluster.node('n1').metrics as NodeMetrics).registry.getMetricsAsArray()) {
    // prom-client's metric objects carry their name, label names and `get()`; its types declare less.
    const { name, labelNames, get } = metric as unknown as { name: string; labelNames: string[]; get: () => Promise<{ type: string }> };
    const type = (await get.call(metric)).type;
    exported.set(name, new Set(labelNames));
    if (type === 'histogram') {
      exported.set(`${name}_bucket`, new Set([...labelNames, 'le']));
      for (const suffix of ['_sum', '_count']) exported.set(`${name}${suffix}`, new Set(labelNames));
    }
  }
});

afterAll(async () => {
  await cluster?.stop();
});

/** The metric names in a PromQL expression, each with the label names of its `{...}` matchers. */
function selectors(expr: string): { metric: string; labels: string[] }[] {
  return [...expr.matchAll(/\b(shardherd_[a-z_]+)(\{([^}]*)\})?/g)].map((m) => ({
    metric: m[1]!,
    labels: [...(m[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)/g)].map((l) => l[1]!),
  }));
}

const queries = () => [
  ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ where: `panel "${p.title}"`, expr: t.expr }))),
  ...dashboard.templating.list.filter((v) => v.definition).map((v) => ({ where: `variable $${v.name}`, expr: v.definition! })),
];

describe('config/grafana/shardherd-dashboard.json', () => {
  it('queries only metrics a node exports, and filters only on their labels', () => {
    const all = queries();
    expect(all.length).toBeGreaterThan(10);
    for (const { where, expr } of all) {
      const used = selectors(expr);
      expect(used.length, `${where}: ${expr} names no shardherd metric`).toBeGreaterThan(0);
      for (const { metric, labels } of used) {
        expect(exported.has(metric), `${where}: ${metric} is not exported`).toBe(true);
        for (const label of labels) expect(exported.get(metric)!.has(label), `${where}: ${metric} has no label ${label}`).toBe(true);
      }
    }
  });

  it('shows shards by status, failovers, recovery time, lag and ingest rate', () => {
    const used = new Set(queries().flatMap(({ expr }) => selectors(expr).map((s) => s.metric)));
    for (const metric of [
      'shardherd_shards',
      'shardherd_singleton_failovers_total',
      'shardherd_singleton_recovery_duration_seconds_bucket',
      'shardherd_ingestion_lag_records',
      'shardherd_dataset_ingested_records_total',
    ]) {
      expect(used.has(metric), metric).toBe(true);
    }
  });

  it('the check itself catches a metric or label the node does not export', () => {
    expect(exported.has('shardherd_shard')).toBe(false);
    expect(exported.get('shardherd_shards')!.has('state')).toBe(false);
    expect(selectors('max by (dataset) (shardherd_shards{state="Active", dataset=~"$dataset"})')).toEqual([
      { metric: 'shardherd_shards', labels: ['state', 'dataset'] },
    ]);
  });
});
