// The edges of a node's HTTP API an operator's script runs into: long and odd path parameters,
// methods a path does not take, requests without the token. The token is checked before anything
// else about a request to a route that changes the cluster; every answer is in the project's error
// shape with a status its route documents; the document's path parameters take exactly the names
// the server takes.
import { request } from 'node:http';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDatasetRef, parseNodeId } from '../../src/core/ids.js';
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import type { NodeApi } from '../../src/http/node-api.js';
import type { SimDriver } from '../../src/sim/driver.js';
import { startApiCluster } from '../support/api-cluster.js';
import type { OpenApiCheck } from '../support/openapi-check.js';

const TOKEN = 'api-edges-token-0123456789';

let cluster: EmbeddedCluster;
let driver: SimDriver;
let api: NodeApi;
let check: OpenApiCheck;

interface Sent {
  readonly method: string;
  /** As sent on the request line: percent-encoded where it needs to be, never normalized. */
  readonly path: string;
  readonly token: string | null;
  readonly body?: string;
  readonly contentType?: string;
}

interface Answer {
  readonly status: number;
  readonly contentType: string | null;
  readonly allow: string | null;
  readonly body: string;
}

/** Sends exactly what it is given (fetch refuses TRACE and normalizes `..` away). */
function send(r: Sent): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (r.token !== null) headers.authorization = `Bearer ${r.token}`;
  if (r.contentType !== undefined) headers['content-type'] = r.contentType;
  // Node sends a DELETE's or an OPTIONS' body unframed unless told its length.
  if (r.body !== undefined) headers['content-length'] = String(Buffer.byteLength(r.body));
  const answered = new Promise<Answer>((resolve, reject) => {
    // A connection of its own: a refusal answered before its body was read may close the one it came on.
    const req = request(api.url, { method: r.method, path: r.path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode!,
          contentType: res.headers['content-type'] ?? null,
          allow: (res.headers.allow as string | undefined) ?? null,
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      );
    });
    req.on('error', reject);
    req.end(r.body);
  });
  return driver.whenSettled(answered);
}

const json = (a: Answer) => JSON.parse(a.body) as Record<string, unknown>;

/** The error envelope of a path, as the API chooses it: FiloDB's on FiloDB's routes. */
const envelopeOf = (path: string) => (path === '/api/v1/cluster' || path.startsWith('/api/v1/cluster/') ? 'FiloDbError' : 'ErrorBody');

/** What a method not documented at a path must answer: the methods that are (HEAD with GET, as Fastify serves it). */
function allowedAt(path: string): string[] {
  const documented = check.methodsAt(path);
  return [...new Set([...documented, ...(documented.includes('GET') ? ['HEAD'] : [])])].sort();
}

/** Why an answer is not what the document says of its request, or undefined when it is. */
function problemOf(sent: Sent, answer: Answer): string | undefined {
  const path = sent.path.split('?')[0]!;
  const head = sent.method === 'HEAD';
  const operation = check.operationOf(head ? 'GET' : sent.method, path);
  if (operation !== undefined) {
    if (head)
      return check.statusesOf(operation).includes(String(answer.status)) ? undefined : `HEAD answered ${answer.status}, which ${operation} does not document`;
    return check.answerProblem(operation, answer.status, answer.contentType, answer.body);
  }
  const allowed = allowedAt(path);
  const expected = allowed.length > 0 ? 405 : 404;
  if (answer.status !== expected) return `answered ${answer.status}, not ${expected} (documented here: ${allowed.join(', ') || 'nothing'})`;
  if (expected === 405 && answer.allow !== allowed.join(', ')) return `Allow is ${answer.allow}, not ${allowed.join(', ')}`;
  if (head) return undefined;
  try {
    return check.componentProblem(envelopeOf(path), JSON.parse(answer.body));
  } catch {
    return `the body is not JSON: ${answer.body.slice(0, 200)}`;
  }
}

beforeAll(async () => {
  ({ cluster, driver, api, check } = await startApiCluster('edges', TOKEN));
});

afterAll(async () => {
  await api?.close();
  await cluster?.stop();
});

describe('the token comes first on a route that changes the cluster', () => {
  const long = 'd'.repeat(2_000);

  it("a 2000-character dataset name answers 401 without the token and 403 with a wrong one, 400 with it, in the project's shape", async () => {
    const remove = { method: 'DELETE', path: `/api/v1/datasets/${long}` } as const;
    expect(json(await send({ ...remove, token: null }))).toMatchObject({ error: 'Unauthorized' });
    expect((await send({ ...remove, token: null })).status).toBe(401);
    expect((await send({ ...remove, token: 'not-the-token-0123' })).status).toBe(403);
    const refused = await send({ ...remove, token: TOKEN });
    expect(refused.status).toBe(400);
    expect(json(refused)).toEqual({ error: 'BadDatasetName', reason: expect.any(String) });
    const stop = { method: 'POST', path: `/api/v1/cluster/${long}/stopshards`, body: '{"shardList":[0]}', contentType: 'application/json' } as const;
    const unauthorized = await send({ ...stop, token: null });
    expect(unauthorized.status).toBe(401);
    expect(json(unauthorized)).toMatchObject({ status: 'error', errorType: 'Unauthorized' });
    expect(json(await send({ ...stop, token: TOKEN }))).toMatchObject({ status: 'error', errorType: 'BadDatasetName' });
  });

  it("a path the router cannot decode answers 401 without the token, and 400 in the project's shape with it", async () => {
    const drain = { method: 'POST', path: '/api/v1/nodes/n%zz/drain' } as const;
    expect((await send({ ...drain, token: null })).status).toBe(401);
    const refused = await send({ ...drain, token: TOKEN });
    expect(refused.status).toBe(400);
    expect(json(refused)).toEqual({ error: 'BadRequest', reason: expect.any(String) });
  });

  it('a long node id is refused under the name the singleton refused it with', async () => {
    const refused = await send({ method: 'POST', path: `/api/v1/nodes/${'n'.repeat(500)}/drain`, token: TOKEN });
    expect(refused.status).toBe(400);
    expect(json(refused)).toMatchObject({ error: 'NodeOperationRefused:bad-node' });
  });
});

describe('methods a path does not take', () => {
  it("answer 405 with Allow naming the methods it takes, in the project's shape", async () => {
    const query = await send({ method: 'QUERY', path: '/api/v1/datasets', token: TOKEN, body: '{}', contentType: 'application/json' });
    expect(query.status).toBe(405);
    expect(query.allow).toBe('GET, HEAD, POST');
    expect(json(query)).toEqual({ error: 'MethodNotAllowed', reason: expect.any(String) });
    const trace = await send({ method: 'TRACE', path: '/api/v1/datasets/metrics', token: null });
    expect(trace.status).toBe(405);
    expect(trace.allow).toBe('DELETE, GET, HEAD');
    const put = await send({ method: 'PUT', path: '/api/v1/cluster/metrics/stopshards', token: null, body: 'x', contentType: 'text/plain' });
    expect(put.status).toBe(405);
    expect(put.allow).toBe('POST');
    expect(json(put)).toMatchObject({ status: 'error', errorType: 'MethodNotAllowed' });
  });

  it("an unknown path stays 404 in the project's shape", async () => {
    const unknown = await send({ method: 'QUERY', path: '/api/v1/nope', token: null, body: '{}', contentType: 'application/json' });
    expect(unknown.status).toBe(404);
    expect(json(unknown)).toEqual({ error: 'NotFound', reason: expect.any(String) });
  });
});

describe("the document's path parameters", () => {
  /** Strings near the names' rules: valid ones, ones a character or a length away, anything. */
  const candidate = fc.oneof(
    fc.stringMatching(/^[A-Za-z0-9._-]{1,140}$/),
    fc.stringMatching(/^[A-Za-z][A-Za-z0-9_-]{60,66}$/),
    fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{125,130}$/),
    fc.string({ maxLength: 40 }),
    fc.string({ unit: 'binary', maxLength: 20 }),
    fc.constantFrom('', '-', '.', 'a\n', 'a ', 'é', 'a/b'),
  );

  it('take exactly the dataset names and node ids the server takes, `with` too', () => {
    const datasetOperations = check.operations.filter((o) => o.includes('{dataset}'));
    const nodeOperations = check.operations.filter((o) => o.includes('{node}'));
    expect(datasetOperations.length).toBeGreaterThanOrEqual(5);
    expect(nodeOperations).toHaveLength(3);
    fc.assert(
      fc.property(candidate, (s) => {
        const dataset = parseDatasetRef(s).ok;
        const node = parseNodeId(s).ok;
        for (const o of datasetOperations) expect(check.acceptsPathParameter(o, 'dataset', s), `${o} ${JSON.stringify(s)}`).toBe(dataset);
        for (const o of nodeOperations) expect(check.acceptsPathParameter(o, 'node', s), `${o} ${JSON.stringify(s)}`).toBe(node);
        expect(check.acceptsBody('POST /api/v1/nodes/{node}/replace', { with: s }), `with ${JSON.stringify(s)}`).toBe(node);
      }),
      { numRuns: 5_000, seed: 7 },
    );
  });
});

describe('random requests', () => {
  /** Every documented path but the event streams (they stay open), and two unknown ones. */
  const templates = () => [
    ...new Set(check.operations.map((o) => o.split(' ')[1]!).filter((p) => !p.endsWith('/events'))),
    '/api/v1/nope',
    '/api/v2/datasets/{dataset}',
  ];
  const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'QUERY', 'TRACE'];
  // No real node's id: a drain that gets through would move copies while the test runs.
  const parameter = fc.oneof(
    fc.constantFrom('metrics', 'ghost', '0', '3', '..', '%zz', '%', 'a%2Fb'),
    fc.string({ maxLength: 80 }).map(encodeURIComponent),
    fc.string({ unit: 'binary', maxLength: 20 }).map(encodeURIComponent),
    fc.integer({ min: 60, max: 3_000 }).map((n) => 'a'.repeat(n)),
    fc.stringMatching(/^[A-Za-z][A-Za-z0-9_-]{0,70}$/),
  );
  const body = fc.option(
    fc.oneof(
      fc.jsonValue({ maxDepth: 2 }).map((v) => ({ body: JSON.stringify(v), contentType: 'application/json' })),
      fc
        .constantFrom({ shardList: [99] }, { with: 'ghost-2' }, { address: 'ghost', shardList: [99] }, {})
        .map((v) => ({ body: JSON.stringify(v), contentType: 'application/json' })),
      fc.constantFrom({ body: 'shardList=1', contentType: 'application/x-www-form-urlencoded' }, { body: '{"shardList":', contentType: 'application/json' }),
    ),
    { nil: undefined },
  );

  it('each answers with a status its route documents and a body its schema takes; others 405 or 404', async () => {
    const sent = fc
      .record({
        method: fc.constantFrom(...METHODS),
        template: fc.constantFrom(...templates()),
        params: fc.array(parameter, { minLength: 2, maxLength: 2 }),
        query: fc.constantFrom('', '', '?x=1'),
        token: fc.constantFrom<string | null>(TOKEN, TOKEN, null, 'not-the-token-0123'),
        body,
      })
      .map(({ method, template, params, query, token, body: b }): Sent => {
        let i = 0;
        const path = template.replace(/\{[^}]+\}/g, () => params[i++]!) + query;
        const carries = b !== undefined && !['GET', 'HEAD', 'TRACE'].includes(method);
        return { method, path, token, ...(carries ? b : {}) };
      });
    await fc.assert(
      fc.asyncProperty(sent, async (r) => {
        const answer = await send(r);
        expect(
          problemOf(r, answer),
          `${r.method} ${r.path.slice(0, 200)} token=${r.token === TOKEN ? 'valid' : String(r.token)} body=${r.body ?? ''}`,
        ).toBeUndefined();
      }),
      { numRuns: 300, seed: 11 },
    );
  }, 30_000);
});
