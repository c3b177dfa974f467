// The status page's data: the cluster view in its compact form, and the difference between two
// views (only the shards that changed, with events in words).
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { datasetRef } from '../../src/core/ids.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { clusterView, type ClusterView, type DatasetView, type MemberView, type ShardView } from '../../src/http/cluster-view.js';
import { diffViews, pageView, type PageView } from '../../src/http/page-state.js';
import { StringTable } from '../../src/core/string-table.js';
import { SingletonClient } from '../../src/http/singleton-client.js';
import { SimDriver } from '../../src/sim/driver.js';

const member = (node: string, rack?: string): MemberView => ({
  node,
  incarnation: `${node}-1`,
  weight: 1,
  joinedAt: 0,
  singleton: node === 'n1',
  copies: 0,
  ...(rack ? { rack } : {}),
});

function dataset(name: string, shards: ShardView[], strategy = 'balanced'): DatasetView {
  return {
    name,
    numShards: shards.length,
    replicationFactor: 2,
    minNumNodes: 2,
    strategy,
    source: { type: 'synthetic' } as DatasetView['source'],
    epoch: 1,
    version: 1,
    counts: {},
    shards,
    cooldowns: [],
  };
}

const active = (shard: number, nodes: string[]): ShardView => ({
  shard,
  status: 'Active',
  owners: nodes.map((node) => ({ node, placement: 'Available', status: 'Active' })),
});

function view(members: MemberView[], datasets: DatasetView[], draining: string[] = []): ClusterView {
  return {
    answeredBy: { node: 'n1', incarnation: 'n1-1', singleton: true },
    singleton: { node: 'n1', incarnation: 'n1-1', epoch: 1 },
    members,
    datasets,
    operations: { draining: draining as unknown as ClusterView['operations']['draining'], replacements: [] },
    problems: [],
  };
}

describe('pageView', () => {
  it('names each node once, and gives every shard as [status, copies, details] in letters', () => {
    const table = new StringTable();
    const shards = [
      active(0, ['n1', 'n2']),
      {
        shard: 1,
        status: 'Recovery',
        progressPct: 40,
        owners: [
          { node: 'n2', placement: 'Initializing', status: 'Recovery' },
          { node: 'n3', placement: 'Leaving', status: 'Active' },
        ],
      },
      { shard: 2, status: 'Error', error: 'poison record at offset 20', owners: [], reason: 'in its reassignment cooldown' },
    ] satisfies ShardView[];
    const v = pageView(view([member('n1'), member('n2'), member('n3')], [dataset('metrics', shards)]), table, 1_000);
    expect(v.nodes).toEqual(['n1', 'n2', 'n3']);
    expect(v.datasets[0]!.shards).toEqual([
      [
        'A',
        [
          [0, 'A', 'A'],
          [1, 'A', 'A'],
        ],
      ],
      [
        'R',
        [
          [1, 'I', 'R'],
          [2, 'L', 'A'],
        ],
        { p: 40 },
      ],
      ['E', [], { e: 'poison record at offset 20', r: 'in its reassignment cooldown' }],
    ]);
    expect(v.datasets[0]!.counts).toEqual({ A: 1, R: 1, E: 1 });
  });

  it("keeps a copy's own error when the view carries one", () => {
    const shard = {
      shard: 0,
      status: 'Active',
      owners: [
        { node: 'n1', placement: 'Available', status: 'Active' },
        { node: 'n2', placement: 'Available', status: 'Error', error: 'disk full' },
      ],
    } as ShardView;
    expect(pageView(view([member('n1'), member('n2')], [dataset('m', [shard])]), new StringTable(), 0).datasets[0]!.shards[0]).toEqual([
      'A',
      [
        [0, 'A', 'A'],
        [1, 'A', 'E', 'disk full'],
      ],
    ]);
  });
});

describe('diffViews', () => {
  const table = new StringTable();
  const base = (): PageView =>
    pageView(
      view([member('n1', 'a'), member('n2', 'b')], [dataset('metrics', [active(0, ['n1', 'n2']), active(1, ['n2', 'n1']), active(2, ['n1', 'n2'])])]),
      table,
      1_000,
    );

  it('says nothing changed when nothing did', () => {
    expect(diffViews(base(), { ...base(), at: 2_000 })).toEqual({ changes: undefined, events: [] });
  });

  it('sends only the shards that changed, whole, and tells each change in words', () => {
    const prev = base();
    const next = pageView(
      view(
        [member('n1', 'a'), member('n2', 'b'), member('n3', 'c')],
        [
          dataset('metrics', [
            active(0, ['n1', 'n2']),
            {
              shard: 1,
              status: 'Active',
              owners: [
                { node: 'n2', placement: 'Leaving', status: 'Active' },
                { node: 'n1', placement: 'Available', status: 'Active' },
                { node: 'n3', placement: 'Initializing', status: 'Assigned' },
              ],
            },
            { shard: 2, status: 'Stopped', owners: [] },
          ]),
        ],
      ),
      table,
      2_000,
    );
    const { changes, events } = diffViews(prev, next);
    expect(changes?.nodes).toEqual({ from: 2, names: ['n3'] });
    expect(changes?.datasets).toEqual([
      {
        name: 'metrics',
        epoch: 1,
        version: 1,
        counts: { A: 2, S: 1 },
        shards: [
          [
            1,
            [
              'A',
              [
                [1, 'L', 'A'],
                [0, 'A', 'A'],
                [2, 'I', 'N'],
              ],
            ],
          ],
          [2, ['S', []]],
        ],
      },
    ]);
    expect(changes?.members?.map((m) => m.node)).toEqual(['n1', 'n2', 'n3']);
    expect(events).toEqual([
      { at: 2_000, what: 'n3 joined in rack c (incarnation n3-1)' },
      { at: 2_000, dataset: 'metrics', shard: 1, from: 'A', to: 'A', what: 'n2: Available → Leaving; +n3 Initializing Assigned' },
      { at: 2_000, dataset: 'metrics', shard: 2, from: 'A', to: 'S', what: 'Active → Stopped; −n1; −n2' },
    ]);
  });

  it('sends a new dataset whole, names a removed one, and tells drains and departures', () => {
    const prev = base();
    const next = pageView(view([member('n1', 'a')], [dataset('logs', [active(0, ['n1'])])], ['n1']), table, 3_000);
    const { changes, events } = diffViews(prev, next);
    expect(changes?.full?.map((d) => d.name)).toEqual(['logs']);
    expect(changes?.removed).toEqual(['metrics']);
    expect(events.map((e) => e.what)).toEqual(['n2 left (incarnation n2-1)', 'n1 draining', 'dataset logs set up: 1 shards × 2', 'dataset metrics removed']);
  });

  it('does not send the members again when only their copy counts moved (the page counts copies itself)', () => {
    const moved = (copies: number) => pageView(view([{ ...member('n1'), copies }], [dataset('m', [active(0, ['n1'])])]), table, copies);
    expect(diffViews(moved(1), moved(2)).changes).toBeUndefined();
  });

  it('does not count a step of recovery progress as an event, but sends it', () => {
    const at = (pct: number) =>
      pageView(
        view(
          [member('n1')],
          [dataset('m', [{ shard: 0, status: 'Recovery', progressPct: pct, owners: [{ node: 'n1', placement: 'Initializing', status: 'Recovery' }] }])],
        ),
        table,
        pct,
      );
    const { changes, events } = diffViews(at(10), at(20));
    expect(changes?.datasets?.[0]?.shards).toEqual([[0, ['R', [[table.of('n1'), 'I', 'R']], { p: 20 }]]]);
    expect(events).toEqual([]);
  });
});

describe('on an embedded cluster', () => {
  let cluster: EmbeddedCluster;
  let driver: SimDriver;
  beforeAll(async () => {
    cluster = new EmbeddedCluster({
      name: 'page-state',
      clock: new SimulatedClock(0),
      nodes: ['n1', 'n2'],
      log: pino({ level: 'silent' }),
      sessionTimeoutMs: 1_500,
      heartbeatIntervalMs: 250,
      settings: { publishIntervalMs: 500, recoveryReplyTimeoutMs: 500, pollIntervalMs: 50, reportResendMs: 500 },
    });
    driver = new SimDriver(cluster);
    await driver.whenSettled(cluster.start());
    await driver.whenSettled(cluster.setupDataset({ ref: 'metrics', numShards: 4, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 10 } }));
    await driver.whenSettled(cluster.whenConverged('metrics'));
  });
  afterAll(() => cluster?.stop());

  it("gives a shard stopped under FiloDB's strategy as Stopped, with the singleton's reason", async () => {
    const stopped = await driver.whenSettled(cluster.request((replyTo) => ({ type: 'StopShards', dataset: datasetRef('metrics'), shards: [2], replyTo })));
    expect(stopped.type).toBe('Success');
    const singleton = new SingletonClient(() => cluster.node('n1'));
    let v: ClusterView | undefined;
    const told = await driver.until(async () => {
      v = await driver.whenSettled(clusterView(singleton));
      return v.datasets[0]!.shards[2]!.reason !== undefined;
    }, 10_000);
    expect(told).toBe(true);
    expect(pageView(v!, new StringTable(), 0).datasets[0]!.shards[2]).toEqual(['S', [], { r: expect.stringMatching(/^stopped by an operator/) }]);
  });
});
