// No record that can never be sent: a dataset whose map the bus could not carry is refused at setup
// (never "set up" and then silent), and a record the bus refuses for good is said once, counted,
// and shown to operators on /status and in the cluster's overview — not retried as temporary.
// On simulated time: the requests over HTTP are answered as the driver moves the cluster's clock.
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { EmbeddedCluster, type EmbeddedClusterOptions } from '../../src/embedded/embedded-cluster.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import { SimDriver } from '../../src/sim/driver.js';

const TOKEN = 'test-token-0123456789';
const synthetic = { type: 'synthetic', recordsPerSecond: 1 };

let cluster: EmbeddedCluster | undefined;
let api: NodeApi | undefined;

afterEach(async () => {
  await api?.close();
  await cluster?.stop();
  api = undefined;
  cluster = undefined;
});

/** An embedded cluster of two nodes with the API on n1, whose log lines are kept. */
async function start(options: Pick<EmbeddedClusterOptions, 'bus' | 'settings'>) {
  const lines: { event?: string; level: number; what?: string }[] = [];
  cluster = new EmbeddedCluster({
    name: 'limits',
    clock: new SimulatedClock(0),
    nodes: ['n1', 'n2'],
    log: pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as never) }),
    sessionTimeoutMs: 1_500,
    heartbeatIntervalMs: 250,
    ...options,
    settings: { publishIntervalMs: 500, recoveryReplyTimeoutMs: 500, pollIntervalMs: 50, reportResendMs: 500, ...options.settings },
  });
  const driver = new SimDriver(cluster);
  await cluster.startNodes();
  await driver.advance(1_500);
  api = await startNodeApi(cluster.node('n1'), { port: 0, token: TOKEN, singletonTimeoutMs: 3_000 });
  const post = (body: unknown) =>
    driver.whenSettled(
      (async () => {
        const res = await fetch(`${api!.url}/api/v1/datasets`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
          body: JSON.stringify(body),
        });
        return { status: res.status, body: (await res.json()) as { error?: string; reason?: string } };
      })(),
    );
  const get = (path: string) => driver.whenSettled((async () => (await (await fetch(`${api!.url}${path}`)).json()) as Record<string, unknown>)());
  return { lines, post, get, driver };
}

describe('records the bus cannot carry', () => {
  it('a dataset whose map could outgrow what the bus carries is refused at setup (413), and nothing is set up', async () => {
    const { post, get } = await start({ settings: { maxMapBytes: 64 * 1024 } });
    const refused = await post({ ref: 'huge', numShards: 4096, minNumNodes: 1, source: synthetic });
    expect(refused.status).toBe(413);
    expect(refused.body.error).toBe('DatasetTooLarge');
    expect(refused.body.reason).toMatch(/dataset huge: its map \(4096 shards × 1\) may take \d+ bytes, more than the 65536/);
    expect((await get('/api/v1/datasets')).datasets).toEqual([]);
    expect((await post({ ref: 'small', numShards: 64, minNumNodes: 1, source: synthetic })).status).toBe(201);
  });

  it('a record the bus refuses for good is logged once, counted, and listed on /status and in the overview', async () => {
    // A misconfiguration on purpose: the singleton's map limit (64 MiB by default) above the bus's.
    const { lines, post, get, driver } = await start({ bus: { maxRecordBytes: 1024, maxMessageBytes: 4 * 1024, retainRecords: 10_000 } });
    expect((await post({ ref: 'wide', numShards: 512, minNumNodes: 1, source: synthetic })).status).toBe(201);
    // The whole map (for the new dataset, then for every node that asks) never goes out.
    await driver.advance(2_500);
    const refusals = lines.filter((l) => l.event === 'bus.record-refused');
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatchObject({ what: 'map-snapshot', level: 50 });
    const singleton = (await cluster!.singletonNode())!;
    expect(singleton.problems.list()).toEqual([expect.objectContaining({ event: 'bus.record-refused', cause: 'map-snapshot' })]);
    expect(singleton.problems.list()[0]!.count).toBeGreaterThan(1);
    const status = (await get('/status')) as { problems: { event: string }[]; singleton?: unknown };
    const overview = (await get('/api/v1/overview')) as {
      problems: { event: string; node: string; message: string }[];
      datasets: { name: string; mapUnavailable?: string }[];
    };
    // The dataset is listed all the same, saying why its shards cannot be shown.
    expect(overview.datasets).toEqual([expect.objectContaining({ name: 'wide', mapUnavailable: expect.stringMatching(/singleton/) })]);
    expect(overview.problems).toEqual([expect.objectContaining({ event: 'bus.record-refused', node: singleton.node })]);
    expect(overview.problems[0]!.message).toMatch(/maxMessageBytes/);
    if (singleton.node === 'n1') expect(status.problems.map((p) => p.event)).toEqual(['bus.record-refused']);
  });
});
