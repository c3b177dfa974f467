// The routes behind the status page, over an embedded cluster on real time: its event stream sends
// one compact snapshot and then only the shards that changed; a shard's details carry its copies'
// rate and lag and its history; each node says what it ingests, and the page's node reads the
// others' over HTTP at their address when they are not in its process.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { IngestionSampler } from '../../src/http/ingestion-sampler.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import type { NodeIngestion } from '../../src/http/node-ingestion.js';
import type { PageChanges, PageView, TimelineEvent } from '../../src/http/page-state.js';
import type { ShardDetails } from '../../src/http/shard-details.js';
import { liveCluster } from '../support/live-cluster.js';

const TOKEN = 'page-routes-token-0123456789';
const RATE = 200;

let cluster: EmbeddedCluster;
let api: NodeApi;
let other: NodeApi;

/** A server-sent event stream read message by message. */
class EventStream {
  private buffer = '';
  private readonly messages: { event: string; data: string }[] = [];
  private readonly abort = new AbortController();
  private reader: ReadableStreamDefaultReader<Uint8Array> | undefined;

  static async open(url: string): Promise<EventStream> {
    const s = new EventStream();
    const res = await fetch(url, { signal: s.abort.signal });
    s.reader = res.body!.getReader();
    return s;
  }

  /** The next message of that event (others are skipped), within `timeoutMs`. */
  async next(event: string, timeoutMs = 10_000): Promise<{ data: string }> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.messages.findIndex((m) => m.event === event);
      if (i >= 0) return this.messages.splice(0, i + 1)[i]!;
      if (Date.now() > deadline) throw new Error(`no ${event} event within ${timeoutMs} ms`);
      const { value, done } = await this.reader!.read();
      if (done) throw new Error('the stream ended');
      this.buffer += new TextDecoder().decode(value);
      let end;
      while ((end = this.buffer.indexOf('\n\n')) >= 0) {
        const block = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 2);
        const ev = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (ev && data !== undefined) this.messages.push({ event: ev, data });
      }
    }
  }

  close(): void {
    this.abort.abort();
  }
}

const get = async <T>(url: string): Promise<{ status: number; body: T }> => {
  const res = await fetch(url);
  return { status: res.status, body: (await res.json()) as T };
};

beforeAll(async () => {
  cluster = liveCluster('page-routes', ['n1', 'n2', 'n3']);
  await cluster.start();
  await cluster.setupDataset({ ref: 'metrics', numShards: 8, minNumNodes: 3, source: { type: 'synthetic', recordsPerSecond: RATE } });
  await cluster.whenConverged('metrics');
  api = await startNodeApi(cluster.node('n1'), { port: 0, token: TOKEN, page: { sampleMs: 300 } });
  other = await startNodeApi(cluster.node('n3'), { port: 0, token: TOKEN });
}, 30_000);

afterAll(async () => {
  await api?.close();
  await other?.close();
  await cluster?.stop();
});

describe('GET /api/v1/node/ingestion', () => {
  it('lists the copies the node ingests, each with its next offset and its lag', async () => {
    const { status, body } = await get<NodeIngestion>(`${other.url}/api/v1/node/ingestion`);
    expect(status).toBe(200);
    expect(body.node).toBe('n3');
    expect(body.incarnation).toBe(cluster.node('n3').incarnation);
    expect(body.tracked).toBe(true);
    const running = (await cluster.node('n3').running()).map((r) => r.shard).sort();
    expect(body.copies.map((c) => c.shard).sort()).toEqual(running);
    for (const c of body.copies) {
      expect(c.position).toBeGreaterThan(0);
      expect(c.lag).toBeGreaterThanOrEqual(0);
    }
  });
});

describe('IngestionSampler', () => {
  it('reads its own node directly and another at its HTTP address, and gives records per second from two readings', async () => {
    const n1 = cluster.node('n1');
    const n3 = cluster.node('n3');
    const sampler = new IngestionSampler(() => n1, { inProcess: false });
    const members = [
      { node: 'n1', incarnation: n1.incarnation! },
      { node: 'n2', incarnation: cluster.node('n2').incarnation! },
      { node: 'n3', incarnation: n3.incarnation!, address: other.url },
      { node: 'n3', incarnation: 'an-older-one', address: other.url },
      { node: 'n4', incarnation: 'x', address: 'http://127.0.0.1:9' },
    ];
    const first = await sampler.sample(members);
    expect(first.map((r) => r.state)).toEqual(['ok', 'no-address', 'ok', 'unreachable', 'unreachable']);
    expect(first[0]!.ratePerSec).toBeUndefined(); // one reading gives no rate
    expect(first[3]!.reason).toMatch(/is n3 \(incarnation /);
    await new Promise((r) => setTimeout(r, 600));
    const second = await sampler.sample(members);
    const copies = (await n3.running()).length;
    // Synthetic records come at RATE per second per shard; the copies keep up.
    expect(second[2]!.copies).toBe(copies);
    expect(second[2]!.ratePerSec).toBeGreaterThan(copies * RATE * 0.5);
    expect(second[2]!.ratePerSec).toBeLessThan(copies * RATE * 2);
    const shard = (await n3.running())[0]!.shard;
    const [sample] = sampler.copies('metrics', shard);
    expect(sample).toMatchObject({ node: 'n3' });
    expect(sample!.ratePerSec).toBeGreaterThan(RATE * 0.5);
  });

  it('reads every node of its process directly, without addresses', async () => {
    const sampler = new IngestionSampler(() => cluster.node('n1'));
    const rows = await sampler.sample(cluster.nodes.map((n) => ({ node: n.node, incarnation: n.incarnation! })));
    expect(rows.map((r) => r.state)).toEqual(['ok', 'ok', 'ok']);
    expect(rows.reduce((n, r) => n + r.copies, 0)).toBe(8);
  });
});

describe('GET /api/v1/page/events and /api/v1/page/shards/:dataset/:shard', () => {
  it("sends a snapshot, then only the shard that changed, and the shard's details tell its copies' rate and lag and its history", async () => {
    const events = await EventStream.open(`${api.url}/api/v1/page/events`);
    try {
      const snapshot = JSON.parse((await events.next('snapshot')).data) as PageView & { timeline: TimelineEvent[] };
      expect(snapshot.nodes).toEqual(['n1', 'n2', 'n3']);
      expect(snapshot.datasets[0]!.shards.map((s) => s[0])).toEqual(Array(8).fill('A'));
      const ingestion = JSON.parse((await events.next('ingestion')).data) as { nodes: { node: string; state: string }[] };
      expect(ingestion.nodes.map((n) => n.state)).toEqual(['ok', 'ok', 'ok']);

      const stop = await fetch(`${api.url}/api/v1/cluster/metrics/stopshards`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ shardList: [5] }),
      });
      expect(stop.status).toBe(200);
      type Changes = PageChanges & { events?: TimelineEvent[] };
      const next = async (): Promise<Changes> => JSON.parse((await events.next('changes')).data) as Changes;
      let changes: Changes;
      do changes = await next();
      while (!changes.datasets);
      // The shard as the node's map has it at once; why it has no copy when the singleton answers (the same or a later update).
      expect(changes.datasets).toEqual([
        {
          name: 'metrics',
          epoch: 1,
          version: expect.any(Number),
          counts: { A: 7, S: 1 },
          shards: [[5, ['S', [], ...(changes.datasets[0]!.shards[0]![1][2] ? [{ r: expect.any(String) }] : [])]]],
        },
      ]);
      expect(changes.events).toEqual([
        { at: changes.at, dataset: 'metrics', shard: 5, from: 'A', to: 'S', what: expect.stringMatching(/^Active → Stopped; −n\d$/) },
      ]);
      while (!changes.datasets?.[0]?.shards[0]?.[1][2]) changes = await next();
      expect(changes.datasets[0]!.shards).toEqual([[5, ['S', [], { r: expect.stringMatching(/^stopped by an operator/) }]]]);

      const stopped = await get<ShardDetails>(`${api.url}/api/v1/page/shards/metrics/5`);
      expect(stopped.body).toMatchObject({
        dataset: 'metrics',
        shard: 5,
        status: 'Stopped',
        reason: expect.stringMatching(/^stopped by an operator/),
        copies: [],
        history: [{ from: 'A', to: 'S' }],
      });
      await events.next('ingestion');
      await events.next('ingestion');
      const running = await get<ShardDetails>(`${api.url}/api/v1/page/shards/metrics/0`);
      expect(running.body.status).toBe('Active');
      expect(running.body.copies).toHaveLength(1);
      expect(running.body.copies[0]!.ingestion?.ratePerSec).toBeGreaterThan(RATE * 0.5);
      expect(running.body.copies[0]!.ingestion?.lag).toBeGreaterThanOrEqual(0);
    } finally {
      events.close();
    }
  }, 30_000);

  it('answers 400 for a shard that is not a number, 404 for an unknown dataset or shard', async () => {
    expect((await get(`${api.url}/api/v1/page/shards/metrics/abc`)).status).toBe(400);
    expect((await get<{ error: string }>(`${api.url}/api/v1/page/shards/nope/0`)).body.error).toBe('DatasetUnknown');
    expect((await get<{ error: string }>(`${api.url}/api/v1/page/shards/metrics/8`)).body.error).toBe('ShardUnknown');
  });

  it("answers a shard's details when no page watches, without history or rates", async () => {
    const details = await get<ShardDetails>(`${other.url}/api/v1/page/shards/metrics/1`);
    expect(details.status).toBe(200);
    expect(details.body).toMatchObject({ status: 'Active', history: [] });
    expect(details.body.copies[0]!.ingestion).toBeUndefined();
  });
});

describe('the page and its icon', () => {
  it('serves the page, which names /favicon.svg, and the icon', async () => {
    const page = await fetch(`${api.url}/`);
    expect(await page.text()).toContain('<link rel="icon" type="image/svg+xml" href="favicon.svg">');
    for (const path of ['/favicon.svg', '/favicon.ico']) {
      const icon = await fetch(`${api.url}${path}`);
      expect(icon.status).toBe(200);
      expect(icon.headers.get('content-type')).toBe('image/svg+xml');
      expect(await icon.text()).toMatch(/^<svg /);
    }
  });
});
