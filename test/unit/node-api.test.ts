// The HTTP API of a node, over an embedded cluster on simulated time (requests over real HTTP): FiloDB's routes in FiloDB's
// shapes, shardherd's own routes, the bearer token on every route that changes something (and a
// refused request changes nothing), errors as JSON, 503 when the singleton does not answer.
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import type { SimDriver } from '../../src/sim/driver.js';
import { simulatedCluster } from '../support/live-cluster.js';
import { resolveAccessToken, tokenFile } from '../../src/http/access-token.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';

const TOKEN = 'test-token-0123456789';
const synthetic = { type: 'synthetic', recordsPerSecond: 200 } as const;

let cluster: EmbeddedCluster;
let driver: SimDriver;
let api: NodeApi;
let dir: string;

// The answers have many shapes, each checked by the assertions that read it.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function call(path: string, init: { method?: string; body?: unknown; token?: string | null } = {}): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = {};
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const token = init.token === undefined ? TOKEN : init.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const res = await request(`${api.url}${path}`, {
    method: init.method ?? 'GET',
    headers,
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  const text = await driver.whenSettled(res.text());
  return { status: res.status, body: text.startsWith('{') ? JSON.parse(text) : text };
}

/** `fetch`, answered as the driver moves the cluster's time. */
const request = (url: string, init?: RequestInit) => driver.whenSettled(fetch(url, init));

/** `probe`'s value once `ok` holds, or its last within `timeoutMs` of the cluster's time. */
async function eventually<T>(probe: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 10_000): Promise<T> {
  let v = await probe();
  await driver.until(async () => ok((v = await probe())), timeoutMs);
  return v;
}

const statusOf = async (dataset: string) =>
  (await call(`/api/v1/cluster/${dataset}/status`)).body.data as { shard: number; status: string; address: string; reason?: string }[];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'shardherd-api-'));
  ({ cluster, driver } = simulatedCluster('api', ['n1', 'n2', 'n3']));
  await driver.whenSettled(cluster.start());
  expect(await driver.whenSettled(cluster.setupDataset({ ref: 'metrics', numShards: 8, minNumNodes: 3, source: synthetic }))).toMatchObject({
    type: 'DatasetVerified',
  });
  api = await startNodeApi(cluster.node('n2'), { port: 0, token: TOKEN, singletonTimeoutMs: 2_000 });
  await eventually(
    () => statusOf('metrics'),
    (s) => s.every((x) => x.status === 'ShardStatusActive'),
  );
});

afterAll(async () => {
  await api?.close();
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("FiloDB's cluster routes", () => {
  it("list the datasets and each shard with its status and address, in FiloDB's envelope", async () => {
    expect(await call('/api/v1/cluster')).toEqual({ status: 200, body: { status: 'success', data: ['metrics'] } });
    const shards = await statusOf('metrics');
    expect(shards.map((s) => s.shard)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    for (const s of shards) {
      expect(s.status).toMatch(/^ShardStatus(Active|Assigned|Unassigned|Error\(.*\)|Stopped|Down|Recovery\(\d+\))$/);
      expect(['n1', 'n2', 'n3']).toContain(s.address);
    }
  });

  it("answer an unknown dataset with 404 and FiloDB's error shape", async () => {
    const res = await call('/api/v1/cluster/nope/status');
    expect(res).toEqual({
      status: 404,
      body: { status: 'error', errorType: 'DatasetUnknown', error: 'Dataset nope is not registered', reason: 'Dataset nope is not registered' },
    });
    expect((await call('/api/v1/cluster/nope/stopshards', { method: 'POST', body: { shardList: [0] } })).status).toBe(404);
  });

  it('stop a shard, say why it is unassigned, and start it again on a chosen node', async () => {
    const owner = (await statusOf('metrics'))[5]!.address; // the only node with room for it (FiloDB's capacity rule)
    expect(await call('/api/v1/cluster/metrics/stopshards', { method: 'POST', body: { shardList: [5] } })).toEqual({
      status: 200,
      body: { status: 'success', data: [] },
    });
    // FiloDB would say ShardStatusDown and place the shard again at the next membership change;
    // shardherd keeps it Stopped until it is started.
    const stopped = await eventually(
      () => statusOf('metrics'),
      (s) => s[5]!.status === 'ShardStatusStopped',
    );
    expect(stopped[5]).toMatchObject({ status: 'ShardStatusStopped', address: '' });
    expect(stopped[5]!.reason).toMatch(/stopshards/);
    const started = await call('/api/v1/cluster/metrics/startshards', { method: 'POST', body: { address: owner, shardList: [5] } });
    expect(started).toEqual({ status: 200, body: { status: 'success', data: [] } });
    const after = await eventually(
      () => statusOf('metrics'),
      (s) => s[5]!.status === 'ShardStatusActive',
    );
    expect(after[5]).toMatchObject({ status: 'ShardStatusActive', address: owner });
    expect(after[5]!.reason).toBeUndefined();
  });

  it("refuse FiloDB's invalid requests with 400 and the error's name (malformed addresses included), changing nothing", async () => {
    const before = await statusOf('metrics');
    const dup = await call('/api/v1/cluster/metrics/stopshards', { method: 'POST', body: { shardList: [1, 1] } });
    expect(dup).toMatchObject({ status: 400, body: { status: 'error', errorType: 'BadSchema', error: 'Invalid shards found [1, 1]. Valid shards are [1]' } });
    const range = await call('/api/v1/cluster/metrics/stopshards', { method: 'POST', body: { shardList: [8] } });
    expect(range).toMatchObject({ status: 400, body: { errorType: 'BadSchema' } });
    const malformed = await call('/api/v1/cluster/metrics/startshards', { method: 'POST', body: { address: 'akka.tcp://x@h:1 /bad', shardList: [0] } });
    expect(malformed).toMatchObject({ status: 400, body: { errorType: 'BadData' } });
    const owned = await call('/api/v1/cluster/metrics/startshards', { method: 'POST', body: { address: 'n1', shardList: [0] } });
    expect(owned).toMatchObject({ status: 400, body: { errorType: 'BadSchema' } });
    const noList = await call('/api/v1/cluster/metrics/stopshards', { method: 'POST', body: { shards: [0] } });
    expect(noList).toMatchObject({ status: 400, body: { status: 'error', errorType: 'BadRequest' } });
    expect(await statusOf('metrics')).toEqual(before);
  });
});

describe('access control', () => {
  it('refuses a mutating request without the token (401) or with a wrong one (403), and the refusal changes nothing', async () => {
    const before = await statusOf('metrics');
    const none = await call('/api/v1/cluster/metrics/stopshards', { method: 'POST', body: { shardList: [2] }, token: null });
    expect(none.status).toBe(401);
    expect(none.body).toMatchObject({ status: 'error', errorType: 'Unauthorized' });
    const wrong = await call('/api/v1/datasets/metrics', { method: 'DELETE', token: 'not-the-token-at-all' });
    expect(wrong).toMatchObject({ status: 403, body: { error: 'Forbidden' } });
    const setup = await call('/api/v1/datasets', { method: 'POST', body: { ref: 'sneaky', numShards: 2, minNumNodes: 1, source: synthetic }, token: null });
    expect(setup.status).toBe(401);
    await driver.advance(600); // a publish interval: a change would show by now
    expect(await statusOf('metrics')).toEqual(before);
    expect((await call('/api/v1/cluster')).body.data).toEqual(['metrics']);
  });

  it('leaves read routes open', async () => {
    for (const path of ['/api/v1/cluster', '/api/v1/overview', '/api/v1/members', '/status', '/healthz', '/metrics', '/api/v1/openapi.json']) {
      expect((await call(path, { token: null })).status, path).toBe(200);
    }
  });

  it('removes the token file it generated when it closes, and leaves one another node wrote since', async () => {
    const env = { SHARDHERD_TOKEN_DIR: join(dir, 'closing') };
    const generated = await startNodeApi(cluster.node('n2'), { port: 0, env });
    const file = generated.token.file!;
    expect(readFileSync(file, 'utf8').trim()).toBe(generated.token.token);
    expect(
      (await request(`${generated.url}/api/v1/datasets/none`, { method: 'DELETE', headers: { authorization: `Bearer ${generated.token.token}` } })).status,
    ).toBe(404);
    await generated.close();
    expect(existsSync(file)).toBe(false);
    // A newer node on the same port overwrote the file: the older one's stop must not take it away.
    const older = await startNodeApi(cluster.node('n2'), { port: 0, env });
    writeFileSync(older.token.file!, 'a-newer-nodes-token\n');
    await older.close();
    expect(readFileSync(older.token.file!, 'utf8')).toBe('a-newer-nodes-token\n');
  });

  it('generates a token when none is configured, readable by its user only, and prefers the config, then the environment', () => {
    const env = { SHARDHERD_TOKEN_DIR: join(dir, 'tokens') };
    const generated = resolveAccessToken(undefined, 4321, env);
    expect(generated.origin).toBe('generated');
    expect(generated.file).toBe(tokenFile(4321, env));
    expect(readFileSync(generated.file!, 'utf8').trim()).toBe(generated.token);
    expect(statSync(generated.file!).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'tokens')).mode & 0o777).toBe(0o700);
    expect(generated.token.length).toBeGreaterThanOrEqual(32);
    expect(resolveAccessToken(undefined, 4321, { ...env, SHARDHERD_TOKEN: 'from-env-0123456789' })).toEqual({
      token: 'from-env-0123456789',
      origin: 'environment',
    });
    expect(resolveAccessToken('from-config-0123456789', 4321, { ...env, SHARDHERD_TOKEN: 'x' })).toEqual({ token: 'from-config-0123456789', origin: 'config' });
  });
});

describe("shardherd's own routes", () => {
  it('set up a dataset once (201), again with the same config (200), refuse another config (409) and a bad one (400)', async () => {
    const config = { ref: 'logs', numShards: 4, minNumNodes: 1, source: synthetic };
    expect(await call('/api/v1/datasets', { method: 'POST', body: config })).toEqual({ status: 201, body: { dataset: 'logs', created: true } });
    expect(await call('/api/v1/datasets', { method: 'POST', body: config })).toEqual({ status: 200, body: { dataset: 'logs', created: false } });
    expect(await call('/api/v1/datasets', { method: 'POST', body: { ...config, numShards: 8 } })).toMatchObject({
      status: 409,
      body: { error: 'DatasetConflict' },
    });
    const bad = await call('/api/v1/datasets', { method: 'POST', body: { ref: 'x', numShards: 3, minNumNodes: 1, source: synthetic } });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('BadSchema');
    expect(bad.body.reason).toMatch(/numShards/);
    // An embedded cluster reads synthetic sources only: a Kafka dataset is refused at setup, not accepted to fail on every shard.
    const kafka = await call('/api/v1/datasets', {
      method: 'POST',
      body: { ref: 'fromkafka', numShards: 2, minNumNodes: 1, source: { type: 'kafka', topic: 'fromkafka' } },
    });
    expect(kafka).toMatchObject({
      status: 422,
      body: { error: 'BadData', reason: expect.stringMatching(/fromkafka has a kafka source, but this cluster reads synthetic sources only/) },
    });
    const listed = await call('/api/v1/datasets');
    expect(listed.body.datasets.map((d: { name: string }) => d.name)).toEqual(['logs', 'metrics']);
    // The list gives each dataset's shards per status, not its shards: the same counts as the dataset's own view.
    const metrics = listed.body.datasets.find((d: { name: string }) => d.name === 'metrics');
    expect(metrics).not.toHaveProperty('shards');
    const shards = (await call('/api/v1/datasets/metrics')).body.shards as { status: string }[];
    const counted: Record<string, number> = {};
    for (const s of shards) counted[s.status] = (counted[s.status] ?? 0) + 1;
    expect(metrics.counts).toEqual(counted);
    expect(shards).toHaveLength(8);
    expect(await call('/api/v1/datasets/logs', { method: 'DELETE' })).toEqual({ status: 200, body: { dataset: 'logs', removed: true } });
    expect(await call('/api/v1/datasets/logs', { method: 'DELETE' })).toMatchObject({ status: 404, body: { error: 'DatasetUnknown' } });
    expect(await call('/api/v1/datasets/Bad%20Name')).toMatchObject({ status: 400, body: { error: 'BadDatasetName' } });
  });

  it("say why shards are unassigned when no node has room (FiloDB's capacity rule)", async () => {
    await call('/api/v1/datasets', { method: 'POST', body: { ref: 'tight', numShards: 8, minNumNodes: 8, source: synthetic } });
    const view = await eventually(
      () => call('/api/v1/datasets/tight'),
      (r) => r.status === 200 && r.body.shards.filter((s: { owners: unknown[] }) => s.owners.length > 0).length === 3,
    );
    const unassigned = view.body.shards.filter((s: { owners: unknown[] }) => s.owners.length === 0);
    expect(unassigned).toHaveLength(5);
    for (const s of unassigned) expect(s.reason).toMatch(/no node has room: each takes at most ceil\(numShards \/ minNumNodes\) = 1 shards/);
    await call('/api/v1/datasets/tight', { method: 'DELETE' });
  });

  it('list members with the singleton marked, and where the singleton is', async () => {
    const members = (await call('/api/v1/members')).body.members as { node: string; singleton: boolean; copies: number }[];
    expect(members.map((m) => m.node)).toEqual(['n1', 'n2', 'n3']);
    expect(members.filter((m) => m.singleton).map((m) => m.node)).toEqual(['n1']);
    expect(members.reduce((n, m) => n + m.copies, 0)).toBe(8);
    expect((await call('/api/v1/singleton')).body).toMatchObject({ node: 'n1', epoch: 1 });
    const status = (await call('/status')).body;
    expect(status).toMatchObject({ node: 'n2', singletonAt: { node: 'n1', epoch: 1 } });
    expect(status.singleton).toBeUndefined(); // the singleton's own state is on its node only
    expect(status.maps).toEqual([expect.objectContaining({ dataset: 'metrics', numShards: 8 })]);
  });

  it('refuse a drain the others have no room for (409, with the reason) and an unknown node (404)', async () => {
    const drain = await call('/api/v1/nodes/n3/drain', { method: 'POST' });
    expect(drain).toMatchObject({ status: 409, body: { error: 'NodeOperationRefused:capacity' } });
    expect(drain.body.reason).toMatch(/n3 holds 3 shards but the other members have room for [0-2] \(at most 3 each\)/);
    expect((await call('/api/v1/node-operations')).body.operations).toEqual({ draining: [], replacements: [] });
    expect(await call('/api/v1/nodes/ghost/drain', { method: 'POST' })).toMatchObject({ status: 404, body: { error: 'NodeOperationRefused:unknown-node' } });
    expect(await call('/api/v1/nodes/n1/replace', { method: 'POST', body: {} })).toMatchObject({ status: 400, body: { error: 'BadRequest' } });
  });

  it('serve the page with an icon it names, also where browsers look when a page names none', async () => {
    const page = await call('/', { token: null });
    expect(page.status).toBe(200);
    const href = /<link rel="icon" type="image\/svg\+xml" href="([^"]+)">/.exec(page.body as string)?.[1];
    expect(href).toBe('favicon.svg');
    for (const path of [`/${href}`, '/favicon.ico']) {
      const res = await request(`${api.url}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^image\/svg\+xml/);
      expect(await res.text()).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"[\s\S]*<\/svg>\n$/);
    }
  });

  it('answer an unknown route with a JSON 404, and describe every route in OpenAPI', async () => {
    expect(await call('/api/v1/nothing')).toMatchObject({ status: 404, body: { error: 'NotFound' } });
    const spec = (await call('/api/v1/openapi.json')).body;
    expect(spec.openapi).toMatch(/^3\./);
    for (const path of ['/api/v1/cluster/{dataset}/startshards', '/api/v1/datasets', '/api/v1/nodes/{node}/drain', '/metrics'])
      expect(Object.keys(spec.paths)).toContain(path);
    expect(spec.paths['/api/v1/cluster/{dataset}/stopshards'].post.security).toEqual([{ bearer: [] }]);
    expect(spec.paths['/api/v1/cluster/{dataset}/status'].get.security).toBeUndefined();
  });

  it('answers 503 with a reason when the singleton does not answer', async () => {
    // A wait shorter than the session timeout, so no new singleton takes over meanwhile.
    const impatient = await startNodeApi(cluster.node('n2'), { port: 0, token: TOKEN, singletonTimeoutMs: 300 });
    const singleton = cluster.node('n1');
    singleton.pause();
    try {
      const res = await request(`${impatient.url}/api/v1/overview`);
      expect(res.status).toBe(503);
      const body = (await res.json()) as { error: string; reason: string };
      expect(body.error).toBe('SingletonUnavailable');
      expect(body.reason).toMatch(/no singleton answered n2 within 300 ms/);
      // FiloDB's status route answers from the node's own copy of the map, with no bus round trip.
      const status = await request(`${impatient.url}/api/v1/cluster/metrics/status`);
      expect(status.status).toBe(200);
      expect(((await status.json()) as { data: { status: string }[] }).data.map((x) => x.status)).toEqual(Array(8).fill('ShardStatusActive'));
    } finally {
      singleton.resume();
      await impatient.close();
    }
  });

  it('answers a change the singleton did not answer in time with 504 OutcomeUnknown; sent again with its key, it was applied once', async () => {
    const impatient = await startNodeApi(cluster.node('n2'), { port: 0, token: TOKEN, singletonTimeoutMs: 300 });
    const other = await startNodeApi(cluster.node('n3'), { port: 0, token: TOKEN });
    const config = { ref: 'late', numShards: 2, minNumNodes: 1, source: synthetic };
    const post = (api: NodeApi, body: unknown, key?: string) =>
      request(`${api.url}/api/v1/datasets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
        body: JSON.stringify(body),
      });
    const singleton = cluster.node('n1');
    singleton.pause();
    let key: string;
    try {
      const res = await post(impatient, config);
      expect(res.status).toBe(504);
      const body = (await res.json()) as { error: string; reason: string };
      expect(body.error).toBe('OutcomeUnknown');
      key = res.headers.get('idempotency-key')!;
      expect(key).toMatch(/^[0-9a-f-]{36}$/);
      expect(body.reason).toContain(`Idempotency-Key: ${key}`);
    } finally {
      singleton.resume();
    }
    try {
      // The request was on its way: the singleton applied it once it ran again. Sent again with its
      // key (to another node, its keys in another order) it is answered as it was then: created.
      const again = await eventually(
        () => post(other, { source: synthetic, minNumNodes: 1, numShards: 2, ref: 'late' }, key),
        (r) => r.status !== 504,
      );
      expect(again.status).toBe(201);
      expect(await again.json()).toEqual({ dataset: 'late', created: true });
      // The same key for another request is refused, and changes nothing.
      const reused = await post(other, { ...config, numShards: 4 }, key);
      expect(reused.status).toBe(422);
      expect(((await reused.json()) as { error: string }).error).toBe('IdempotencyKeyReused');
      expect((await call('/api/v1/datasets/late')).body.numShards).toBe(2);
      // A key that is not one is refused before anything is asked.
      expect((await post(other, config, 'not a key!')).status).toBe(400);
    } finally {
      await impatient.close();
      await other.close();
      await call('/api/v1/datasets/late', { method: 'DELETE' });
    }
  });
});
