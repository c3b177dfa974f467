// The OpenAPI description of a node's API, against the API itself: the document is a sound
// OpenAPI 3.0.3 document whose schemas Ajv compiles, and every answer of every route, driven into
// its successes and its refusals, has a status the route documents and a body its schema takes.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateDatasetConfig } from '../../src/core/dataset-config.js';
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import type { SimDriver } from '../../src/sim/driver.js';
import { startApiCluster, type ApiCluster } from '../support/api-cluster.js';
import { structuralProblems, type OpenApiCheck } from '../support/openapi-check.js';

const TOKEN = 'openapi-test-token-0123456789';
const synthetic = { type: 'synthetic', recordsPerSecond: 100 } as const;

let cluster: EmbeddedCluster;
let driver: SimDriver;
let api: NodeApi;
let check: OpenApiCheck;
let request: ApiCluster['request'];
/** Per operation, the statuses it answered in this file. */
const seen = new Map<string, Set<number>>();

interface Call {
  readonly method?: string;
  readonly body?: unknown;
  readonly raw?: string | Uint8Array;
  readonly contentType?: string;
  readonly token?: string | null;
  readonly on?: NodeApi;
}

/** A request to the API whose answer must match the description: its status documented, its body valid for it. */
async function call(path: string, init: Call = {}): Promise<{ status: number; body: string }> {
  const method = init.method ?? 'GET';
  const headers: Record<string, string> = {};
  const payload = init.raw ?? (init.body === undefined ? undefined : JSON.stringify(init.body));
  if (payload !== undefined) headers['content-type'] = init.contentType ?? 'application/json';
  const token = init.token === undefined ? TOKEN : init.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const res = await request(`${(init.on ?? api).url}${path}`, { method, headers, ...(payload === undefined ? {} : { body: payload }) });
  const body = await driver.whenSettled(res.text());
  const operation = check.operationOf(method, path);
  expect(operation, `${method} ${path} is documented`).toBeDefined();
  expect(check.answerProblem(operation!, res.status, res.headers.get('content-type'), body)).toBeUndefined();
  let statuses = seen.get(operation!);
  if (!statuses) seen.set(operation!, (statuses = new Set()));
  statuses.add(res.status);
  return { status: res.status, body };
}

const json = (r: { body: string }) => JSON.parse(r.body) as Record<string, unknown>;

beforeAll(async () => {
  ({ cluster, driver, api, check, request } = await startApiCluster('openapi', TOKEN));
});

afterAll(async () => {
  await api?.close();
  await cluster?.stop();
});

describe('the OpenAPI document', () => {
  it('is a sound OpenAPI 3.0.3 document: every route, its statuses with descriptions and schemas, every schema in components', () => {
    expect(structuralProblems(check.doc)).toEqual([]);
    expect(Object.keys(check.doc.components.schemas).length).toBeGreaterThanOrEqual(20);
    // The answers that used to be documented as "200 Default Response".
    for (const op of ['POST /api/v1/nodes/{node}/drain', 'POST /api/v1/nodes/{node}/undrain', 'POST /api/v1/nodes/{node}/replace']) {
      const responses = check.doc.paths[op.split(' ')[1]!].post.responses;
      expect(Object.keys(responses), op).toEqual(expect.arrayContaining(['202', '400', '401', '403', '404', '409', '503']));
      expect(responses['200'], op).toBeUndefined();
    }
    expect(Object.keys(check.doc.paths['/api/v1/datasets'].post.responses)).toEqual(expect.arrayContaining(['200', '201', '400', '409', '413', '422', '503']));
  });

  it('the structural check finds what breaks a document', () => {
    const broken = structuredClone(check.doc);
    broken.paths['/api/v1/overview'].get.responses['200'].description = 'Default Response';
    broken.components.schemas.ErrorBody.properties.error = { type: 'string', const: 'x' };
    for (const method of ['get', 'head'])
      broken.paths['/api/v1/members'][method].responses['200'].content['application/json'].schema = { $ref: '#/components/schemas/Nowhere' };
    expect(structuralProblems(broken)).toEqual(
      expect.arrayContaining([
        'GET /api/v1/overview 200: needs a description of its own',
        'components.schemas.ErrorBody.properties.error: has "const", not an OpenAPI 3.0 schema keyword',
        'GET /api/v1/members 200.application/json.schema: refers to #/components/schemas/Nowhere, which is not in components.schemas',
        'components.schemas.MemberList: is referenced by no operation',
      ]),
    );
  });

  it('documents a dataset config that takes every config the validator takes', () => {
    const valid = {
      ref: 'metrics',
      numShards: 8,
      minNumNodes: 2,
      spread: 2,
      replicationFactor: 2,
      strategy: 'balanced',
      maxConcurrentMoves: 4,
      copyStartFrom: 'serving-copies',
      source: { type: 'kafka', topic: 'metrics.in', startFrom: 'latest' },
    };
    const field = fc.constantFrom(
      'ref',
      'numShards',
      'minNumNodes',
      'spread',
      'replicationFactor',
      'strategy',
      'maxConcurrentMoves',
      'copyStartFrom',
      'replacementDelayMs',
      'source',
    );
    const value = fc.oneof(
      fc.integer({ min: -2, max: 70_000 }),
      fc.constantFrom(1, 2, 16, 65536, 0.5, 'balanced', 'filodb-default', 'earliest', 'x', null),
      fc.constant({ type: 'synthetic' }),
      fc.constant({ type: 'synthetic', recordsPerSecond: 0.5 }),
    );
    let takenByBoth = 0;
    fc.assert(
      fc.property(field, value, fc.boolean(), (f, v, drop) => {
        const config: Record<string, unknown> = { ...valid };
        if (drop) delete config[f];
        else config[f] = v;
        if (validateDatasetConfig(config).ok) {
          takenByBoth += 1;
          expect(check.acceptsBody('POST /api/v1/datasets', config), JSON.stringify(config)).toBe(true);
        }
      }),
      { numRuns: 1_000, seed: 22 },
    );
    expect(takenByBoth).toBeGreaterThan(50);
  });

  it('documents a loadBalance section that takes every one the validator takes; the moves at once below 1 or fractional are refused', () => {
    const balanced = { ref: 'hot', numShards: 8, minNumNodes: 1, strategy: 'balanced', source: synthetic };
    const field = fc.constantFrom(
      'measure',
      'band',
      'triggerBand',
      'sustainMs',
      'maxMovesPerHour',
      'maxConcurrentMoves',
      'maxConcurrentMovesPerNode',
      'shardCooldownMs',
      'staleMs',
    );
    const value = fc.oneof(fc.integer({ min: -2, max: 600_000 }), fc.constantFrom(0.05, 0.5, 1.5, 'records', 'weight', 'x', null));
    let takenByBoth = 0;
    fc.assert(
      fc.property(field, value, (f, v) => {
        const config = { ...balanced, loadBalance: { [f]: v } };
        const taken = validateDatasetConfig(config).ok;
        expect(check.acceptsBody('POST /api/v1/datasets', config) || !taken, JSON.stringify(config)).toBe(true);
        if (taken) takenByBoth += 1;
      }),
      { numRuns: 1_000, seed: 37 },
    );
    expect(takenByBoth).toBeGreaterThan(100);
    for (const f of ['maxConcurrentMoves', 'maxConcurrentMovesPerNode']) {
      expect(check.acceptsBody('POST /api/v1/datasets', { ...balanced, loadBalance: { [f]: 0 } }), f).toBe(false);
      expect(check.acceptsBody('POST /api/v1/datasets', { ...balanced, loadBalance: { [f]: 2.5 } }), f).toBe(false);
    }
  });
});

describe('every route answers as documented', () => {
  it("FiloDB's routes", async () => {
    expect((await call('/api/v1/cluster')).status).toBe(200);
    expect((await call('/api/v1/cluster/metrics/status')).status).toBe(200);
    expect((await call('/api/v1/cluster/nope/status')).status).toBe(404);
    expect((await call('/api/v1/cluster/no%20pe/status')).status).toBe(400);
    const owner = JSON.parse((await call('/api/v1/cluster/metrics/status')).body).data[5].address as string;
    expect((await call('/api/v1/cluster/metrics/stopshards', { method: 'POST', body: { shardList: [5] } })).status).toBe(200);
    expect((await call('/api/v1/cluster/metrics/stopshards', { method: 'POST', body: { shardList: [1, 1] } })).status).toBe(400);
    expect((await call('/api/v1/cluster/metrics/stopshards', { method: 'POST', body: { shardList: [1] }, token: null })).status).toBe(401);
    expect((await call('/api/v1/cluster/metrics/stopshards', { method: 'POST', body: { shardList: [1] }, token: 'not-the-token-0123' })).status).toBe(403);
    expect((await call('/api/v1/cluster/nope/stopshards', { method: 'POST', body: { shardList: [1] } })).status).toBe(404);
    expect(
      (await call('/api/v1/cluster/metrics/stopshards', { method: 'POST', raw: 'shardList=1', contentType: 'application/x-www-form-urlencoded' })).status,
    ).toBe(415);
    expect((await call('/api/v1/cluster/metrics/stopshards', { method: 'POST', raw: `{"shardList":[${'1,'.repeat(600_000)}1]}` })).status).toBe(413);
    const started = await call('/api/v1/cluster/metrics/startshards', { method: 'POST', body: { address: owner, shardList: [5] } });
    expect(started.status).toBe(200);
    expect((await call('/api/v1/cluster/metrics/startshards', { method: 'POST', body: { address: 'akka://x y', shardList: [0] } })).status).toBe(400);
    await driver.whenSettled(cluster.whenConverged('metrics', { timeoutMs: 10_000 }));
  });

  it("shardherd's reads and the node's own routes", async () => {
    for (const path of [
      '/api/v1/overview',
      '/api/v1/datasets',
      '/api/v1/datasets/metrics',
      '/api/v1/members',
      '/api/v1/singleton',
      '/api/v1/cooldowns',
      '/api/v1/node-operations',
      '/status',
      '/api/v1/node',
      '/healthz',
      '/metrics',
      '/api/v1/node/ingestion',
      '/api/v1/page/shards/metrics/3',
    ]) {
      expect((await call(path)).status, path).toBe(200);
    }
    // The singleton's node adds the singleton's own state to /status.
    const onSingleton = await startNodeApi(cluster.node('n1'), { port: 0, token: TOKEN });
    try {
      expect(json(await call('/status', { on: onSingleton })).singleton).toMatchObject({ epoch: 1 });
    } finally {
      await onSingleton.close();
    }
    expect((await call('/api/v1/datasets/nope')).status).toBe(404);
    expect((await call('/api/v1/datasets/no%20pe')).status).toBe(400);
    expect((await call('/api/v1/page/shards/metrics/8')).status).toBe(404);
    expect((await call('/api/v1/page/shards/nope/0')).status).toBe(404);
    expect((await call('/api/v1/page/shards/metrics/x')).status).toBe(400);
    // The event stream: its head is enough (it stays open).
    const abort = new AbortController();
    const events = await request(`${api.url}/api/v1/events`, { signal: abort.signal });
    expect(
      check.answerProblem(check.operationOf('GET', '/api/v1/events')!, events.status, events.headers.get('content-type'), 'retry: 2000\n\n'),
    ).toBeUndefined();
    seen.set('GET /api/v1/events', new Set([events.status]));
    abort.abort();
    // The page's stream, and a shard's details while it runs (with history and rates).
    const pageAbort = new AbortController();
    const page = await request(`${api.url}/api/v1/page/events`, { signal: pageAbort.signal });
    expect(
      check.answerProblem(check.operationOf('GET', '/api/v1/page/events')!, page.status, page.headers.get('content-type'), 'retry: 2000\n\n'),
    ).toBeUndefined();
    seen.set('GET /api/v1/page/events', new Set([page.status]));
    let details: Record<string, unknown> = {};
    await driver.until(async () => {
      details = json(await call('/api/v1/page/shards/metrics/3'));
      return (details.copies as { ingestion?: unknown }[])[0]?.ingestion !== undefined;
    }, 10_000);
    expect(details.copies).toEqual([expect.objectContaining({ ingestion: expect.objectContaining({ position: expect.any(Number) }) })]);
    pageAbort.abort();
  });

  it('dataset setup and removal', async () => {
    const logs = { ref: 'logs', numShards: 2, minNumNodes: 1, source: synthetic };
    expect((await call('/api/v1/datasets', { method: 'POST', body: logs })).status).toBe(201);
    expect((await call('/api/v1/datasets', { method: 'POST', body: logs })).status).toBe(200);
    expect((await call('/api/v1/datasets', { method: 'POST', body: { ...logs, numShards: 4 } })).status).toBe(409);
    expect(json(await call('/api/v1/datasets', { method: 'POST', body: { ...logs, numShards: 3 } }))).toMatchObject({ error: 'BadSchema' });
    expect(json(await call('/api/v1/datasets', { method: 'POST', body: { ...logs, spread: 5 } }))).toMatchObject({
      error: 'BadSchema',
      reason: expect.stringMatching(/spread/),
    });
    expect((await call('/api/v1/datasets', { method: 'POST', body: { ...logs, ref: 'k', source: { type: 'kafka', topic: 'k' } } })).status).toBe(422);
    expect((await call('/api/v1/datasets?createTopic=yes', { method: 'POST', body: logs })).status).toBe(400);
    expect((await call('/api/v1/datasets/logs', { method: 'DELETE' })).status).toBe(200);
    expect((await call('/api/v1/datasets/logs', { method: 'DELETE' })).status).toBe(404);
    expect((await call('/api/v1/datasets/metrics', { method: 'DELETE', body: { confirm: true } })).status).toBe(400);
  });

  it("a load-aware dataset's placement, and pausing its moves for load", async () => {
    const hot = { ref: 'hot', numShards: 4, minNumNodes: 1, strategy: 'balanced', loadBalance: {}, source: synthetic };
    expect((await call('/api/v1/datasets', { method: 'POST', body: hot })).status).toBe(201);
    expect(json(await call('/api/v1/datasets/hot/placement'))).toMatchObject({ dataset: 'hot', measure: 'records', band: 0.05, paused: false });
    expect(json(await call('/api/v1/datasets/hot/load-balancing', { method: 'PUT', body: { paused: true } }))).toEqual({ dataset: 'hot', paused: true });
    expect(json(await call('/api/v1/datasets/hot/placement'))).toMatchObject({ paused: true, verdict: 'paused' });
    expect((await call('/api/v1/datasets/hot/load-balancing', { method: 'PUT', body: { paused: 'yes' } })).status).toBe(400);
    expect(json(await call('/api/v1/datasets/metrics/placement'))).toMatchObject({ error: 'NotLoadAware' });
    expect((await call('/api/v1/datasets/metrics/load-balancing', { method: 'PUT', body: { paused: false } })).status).toBe(409);
    expect((await call('/api/v1/datasets/nope/placement')).status).toBe(404);
    expect((await call('/api/v1/datasets/nope/load-balancing', { method: 'PUT', body: { paused: false } })).status).toBe(404);
    expect((await call('/api/v1/datasets/no%20pe/placement')).status).toBe(400);
    expect((await call('/api/v1/datasets/hot', { method: 'DELETE' })).status).toBe(200);
  });

  it('node operations', async () => {
    expect((await call('/api/v1/nodes/ghost/drain', { method: 'POST' })).status).toBe(404);
    expect((await call('/api/v1/nodes/n2/replace', { method: 'POST', body: { with: 5 } })).status).toBe(400);
    expect(json(await call('/api/v1/nodes/n2/replace', { method: 'POST', body: { with: 'n9' } }))).toMatchObject({ operation: 'replace', pending: true });
    expect((await call('/api/v1/nodes/n2/undrain', { method: 'POST' })).status).toBe(202);
    // n1 takes n3's copies; then nobody has room for n2's.
    expect((await call('/api/v1/nodes/n3/drain', { method: 'POST', body: {} })).status).toBe(202);
    expect(json(await call('/api/v1/nodes/n2/drain', { method: 'POST' }))).toMatchObject({ error: 'NodeOperationRefused:capacity' });
    expect((await call('/api/v1/nodes/n3/undrain', { method: 'POST' })).status).toBe(202);
  });

  it('a route that needs the singleton, while it does not answer', async () => {
    const impatient = await startNodeApi(cluster.node('n2'), { port: 0, token: TOKEN, singletonTimeoutMs: 300 });
    const singleton = cluster.node('n1');
    singleton.pause();
    try {
      expect((await call('/api/v1/overview', { on: impatient })).status).toBe(503);
      expect((await call('/api/v1/node-operations', { on: impatient })).status).toBe(503);
      // FiloDB's routes answer from the node's own maps: monitors that poll them see no outage.
      expect((await call('/api/v1/cluster', { on: impatient })).status).toBe(200);
    } finally {
      singleton.resume();
      await impatient.close();
    }
  });

  it('every read answers HEAD as its GET does: the same status and content type, no body', async () => {
    const heads = check.operations.filter((o) => o.startsWith('HEAD '));
    expect(heads.length).toBeGreaterThanOrEqual(15);
    for (const operation of heads) {
      const path = operation.slice('HEAD '.length).replace('{dataset}', 'metrics').replace('{shard}', '3');
      // The event streams stay open: their headers are enough.
      const abort = new AbortController();
      const get = await request(`${api.url}${path}`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: abort.signal });
      abort.abort();
      const head = await call(path, { method: 'HEAD' });
      expect([head.status, head.body], operation).toEqual([get.status, '']);
    }
  });

  it('every documented operation was driven', () => {
    expect([...seen.keys()].sort()).toEqual([...check.operations].sort());
  });
});
