// Random bodies at every route that changes the cluster, on a running embedded cluster with its
// HTTP API: wrong types, nulls, huge arrays, unknown fields, deep nesting, wrong content types,
// bodies that are not JSON or not UTF-8. A body outside the route's documented schema is never
// answered 2xx: it gets 400 (413, 415) under one of the project's documented error names, no map
// changes, and the node stays up. An operator's typo must never stop a shard.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import type { NodeApi } from '../../src/http/node-api.js';
import type { SimDriver } from '../../src/sim/driver.js';
import { startApiCluster, type ApiCluster } from '../support/api-cluster.js';
import type { OpenApiCheck } from '../support/openapi-check.js';

const TOKEN = 'strict-inputs-token-0123456789';
/** The names a refused body answers (docs/OPERATIONS.md). */
const BODY_ERRORS = ['BadRequest', 'BadSchema', 'MalformedBody', 'UnsupportedMediaType', 'BodyTooLarge'];

/** Every mutating route, with its path filled in and a body it takes (to mutate), or none. */
const ROUTES = [
  { method: 'POST', path: '/api/v1/cluster/metrics/startshards', valid: { address: 'n1', shardList: [0] } },
  { method: 'POST', path: '/api/v1/cluster/metrics/stopshards', valid: { shardList: [0] } },
  { method: 'POST', path: '/api/v1/datasets', valid: { ref: 'fuzzed', numShards: 2, minNumNodes: 1, source: { type: 'synthetic' } } },
  { method: 'DELETE', path: '/api/v1/datasets/metrics', valid: undefined },
  { method: 'POST', path: '/api/v1/nodes/n2/drain', valid: undefined },
  { method: 'POST', path: '/api/v1/nodes/n2/undrain', valid: undefined },
  { method: 'POST', path: '/api/v1/nodes/n2/replace', valid: { with: 'n9' } },
  { method: 'PUT', path: '/api/v1/datasets/metrics/load-balancing', valid: { paused: true } },
] as const;

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** What is sent: the bytes and the content type (none: no header). */
interface Sent {
  readonly contentType: string | undefined;
  readonly raw: string | Uint8Array;
}

const WRONG_VALUES: Json[] = [null, '7', '0', true, false, 1.5, -1, 0, {}, [], [true], [null], ['7'], [1.5], [[0]], { '0': 0 }, 'n1 ', '', 'x'.repeat(300)];

/** A body near the route's valid one: a field retyped, dropped or added, or the whole of it replaced. */
function mutatedJson(valid: Json | undefined): fc.Arbitrary<Json> {
  const base = (valid ?? {}) as Record<string, Json>;
  const keys = Object.keys(base);
  return fc.oneof(
    fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json>,
    fc.tuple(fc.constantFrom(...(keys.length ? keys : ['x'])), fc.constantFrom(...WRONG_VALUES)).map(([k, v]) => ({ ...base, [k]: v })),
    fc.constantFrom(...(keys.length ? keys : ['x'])).map((k) => Object.fromEntries(Object.entries(base).filter(([key]) => key !== k))),
    fc.tuple(fc.string({ minLength: 1, maxLength: 12 }), fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<Json>).map(([k, v]) => ({ ...base, [`${k}_`]: v })),
    fc.integer({ min: 65_537, max: 70_000 }).map((n) => ({ ...base, shardList: Array.from({ length: n }, (_, i) => i % 8) })),
    fc.constantFrom(...WRONG_VALUES),
  );
}

/** JSON nested `depth` deep, as text (JSON.stringify itself would recurse that deep). */
const deeplyNested = fc
  .tuple(fc.integer({ min: 100, max: 20_000 }), fc.boolean())
  .map(([depth, arrays]) => (arrays ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`));

/** JSON text with bytes that are not UTF-8 inside a string. */
const invalidUtf8 = fc
  .tuple(
    fc.constantFrom('{"with":"', '{"shardList":[0],"x":"', '{"address":"', '{"ref":"'),
    fc.constantFrom([0xff], [0xc3, 0x28], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]),
  )
  .map(([head, bad]) => new Uint8Array([...Buffer.from(head), ...bad, ...Buffer.from('"}')]));

function sentBodies(valid: Json | undefined): fc.Arbitrary<Sent> {
  const jsonType = fc.constantFrom('application/json', 'application/json; charset=utf-8');
  const wrongType = fc.constantFrom(
    undefined,
    'text/plain',
    'application/x-www-form-urlencoded',
    'application/xml',
    'multipart/form-data; boundary=x',
    'application/merge-patch+json',
  );
  return fc.oneof(
    { weight: 5, arbitrary: fc.record({ contentType: jsonType, raw: mutatedJson(valid).map((v) => JSON.stringify(v)) }) },
    { weight: 1, arbitrary: fc.record({ contentType: jsonType, raw: deeplyNested }) },
    {
      weight: 1,
      arbitrary: fc.record({
        contentType: jsonType,
        raw: fc.oneof(fc.string({ maxLength: 40 }), fc.constant(JSON.stringify(valid ?? {}).slice(0, -1)), fc.constant('')),
      }),
    },
    { weight: 1, arbitrary: fc.record({ contentType: jsonType, raw: invalidUtf8 }) },
    { weight: 2, arbitrary: fc.record({ contentType: wrongType, raw: fc.constant(JSON.stringify(valid ?? { x: 1 })) }) },
  );
}

let cluster: EmbeddedCluster;
let driver: SimDriver;
let api: NodeApi;
let check: OpenApiCheck;
let request: ApiCluster['request'];

/** Whether the route's documented schema takes this body (it is then not sent: only refusals are under test). */
function inSchema(operation: string, sent: Sent): boolean {
  if (sent.contentType === undefined || sent.contentType.split(';')[0] !== 'application/json') return false;
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(typeof sent.raw === 'string' ? Buffer.from(sent.raw) : sent.raw);
  } catch {
    return false;
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return false;
  }
  const takesBody = check.doc.paths[operation.split(' ')[1]!][operation.split(' ')[0]!.toLowerCase()].requestBody !== undefined;
  if (!takesBody) return typeof body === 'object' && body !== null && !Array.isArray(body) && Object.keys(body).length === 0;
  return check.acceptsBody(operation, body);
}

/** What an operator can see changing: every map's stamp, the node operations, the datasets. */
async function clusterState(): Promise<string> {
  const datasets = (await (await request(`${api.url}/api/v1/datasets`)).json()) as { datasets: { name: string; epoch: number; version: number }[] };
  const operations = await (await request(`${api.url}/api/v1/node-operations`)).json();
  return JSON.stringify({ maps: datasets.datasets.map((d) => [d.name, d.epoch, d.version]), operations });
}

beforeAll(async () => {
  // n1 has room for n2's shards: a drain that got through would start moves and change the map.
  ({ cluster, driver, api, check, request } = await startApiCluster('strict', TOKEN));
});

afterAll(async () => {
  await api?.close();
  await cluster?.stop();
});

describe("bodies outside a route's schema", () => {
  it('cover every route that changes the cluster', () => {
    const mutating = check.operations.filter((op) => {
      const [method, path] = op.split(' ');
      return (check.doc.paths[path!][method!.toLowerCase()].security ?? []).length > 0;
    });
    expect(ROUTES.map((r) => check.operationOf(r.method, r.path)).sort()).toEqual(mutating.sort());
  });

  it('are refused with 400, 413 or 415 and a documented name, change nothing, and leave the node up', async () => {
    const before = await clusterState();
    const refused = new Map<string, number>();
    const route = fc.constantFrom(...ROUTES).chain((r) => fc.tuple(fc.constant(r), sentBodies(r.valid as Json | undefined)));
    await fc.assert(
      fc.asyncProperty(route, async ([r, sent]) => {
        const operation = check.operationOf(r.method, r.path)!;
        fc.pre(!inSchema(operation, sent));
        const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` };
        if (sent.contentType !== undefined) headers['content-type'] = sent.contentType;
        const res = await request(`${api.url}${r.path}`, { method: r.method, headers, body: sent.raw });
        const text = await res.text();
        expect([400, 413, 415], `${r.method} ${r.path} ${String(sent.raw).slice(0, 120)} → ${res.status} ${text.slice(0, 200)}`).toContain(res.status);
        const body = JSON.parse(text) as { error?: string; errorType?: string };
        expect(BODY_ERRORS).toContain(r.path.startsWith('/api/v1/cluster/') ? body.errorType : body.error);
        expect(check.answerProblem(operation, res.status, res.headers.get('content-type'), text)).toBeUndefined();
        refused.set(operation, (refused.get(operation) ?? 0) + 1);
      }),
      { numRuns: 350, seed: 2211 },
    );
    for (const r of ROUTES) expect(refused.get(check.operationOf(r.method, r.path)!) ?? 0, `${r.method} ${r.path}`).toBeGreaterThan(10);
    await driver.advance(1_000); // two publish intervals: a change would show by now
    expect(await clusterState()).toBe(before);
    expect(cluster.nodes.map((n) => n.state)).toEqual(['running', 'running', 'running']);
    for (const n of cluster.nodes) expect(n.actors?.crashes, `${n.node}'s actors`).toBe(0);
    expect((await request(`${api.url}/healthz`)).status).toBe(200);
  }, 120_000);

  it("the issue's examples: no stopped shard, no replacement by a node called 5", async () => {
    const before = await clusterState();
    const post = (path: string, raw: string) =>
      request(`${api.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: raw });
    for (const raw of ['{"shardList":null}', '{"shardList":"7"}', '{"shardList":[true]}']) {
      const res = await post('/api/v1/cluster/metrics/stopshards', raw);
      expect(res.status, raw).toBe(400);
      expect(await res.json()).toMatchObject({ status: 'error', errorType: 'BadRequest' });
    }
    const replace = await post('/api/v1/nodes/n2/replace', '{"with":5}');
    expect(replace.status).toBe(400);
    expect(await replace.json()).toEqual({ error: 'BadRequest', reason: 'body/with must be string' });
    expect(await (await post('/api/v1/cluster/metrics/stopshards', '{"shardList":[0')).json()).toMatchObject({ errorType: 'MalformedBody' });
    const form = await request(`${api.url}/api/v1/cluster/metrics/stopshards`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'text/plain' },
      body: '{"shardList":[0]}',
    });
    expect(form.status).toBe(415);
    expect(await form.json()).toMatchObject({ errorType: 'UnsupportedMediaType' });
    await driver.advance(1_000);
    expect(await clusterState()).toBe(before);
  });
});
