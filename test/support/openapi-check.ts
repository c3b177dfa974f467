// Reading a node's OpenAPI description the way a client generator would, to hold the API to it:
// a structural check of the document as OpenAPI 3.0.3 (no validator package is installed), its
// schemas compiled by Ajv (Fastify's, through its public `validatorCompiler`, strict, without
// coercion), and each answer checked against the schema its route documents for that status.
import Fastify, { type FastifySchemaCompiler } from 'fastify';

/** An OpenAPI document as JSON, read loosely: the checks below say what must be there. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type OpenApiDocument = any;

type Validate = (data: unknown) => boolean | { error?: Error };

export interface OpenApiCheck {
  readonly doc: OpenApiDocument;
  /** Every operation as `METHOD /path/{template}`. */
  readonly operations: readonly string[];
  /** The operation a concrete request goes to (`POST /api/v1/nodes/n2/drain` → `POST /api/v1/nodes/{node}/drain`). */
  operationOf(method: string, url: string): string | undefined;
  /** Why an answer does not match its operation's documentation, or undefined when it does. */
  answerProblem(operation: string, status: number, contentType: string | null, body: string): string | undefined;
  /** Whether a JSON body is one the operation's request body schema takes (false when it takes no body). */
  acceptsBody(operation: string, body: unknown): boolean;
  /** Whether the operation's path parameter `name` takes `value` (false when it has no such parameter). */
  acceptsPathParameter(operation: string, name: string, value: string): boolean;
  /** The statuses the operation documents. */
  statusesOf(operation: string): string[];
  /** The methods documented at a concrete path, upper case and sorted; empty for an undocumented path. */
  methodsAt(url: string): string[];
  /** Why `data` is not what the component schema `name` describes, or undefined when it is. */
  componentProblem(name: string, data: unknown): string | undefined;
}

const SCHEMAS = '#/components/schemas/';

/** Keywords a Schema Object may have in OpenAPI 3.0.3 (besides `x-` extensions). */
const SCHEMA_KEYWORDS = new Set([
  'title',
  'multipleOf',
  'maximum',
  'exclusiveMaximum',
  'minimum',
  'exclusiveMinimum',
  'maxLength',
  'minLength',
  'pattern',
  'maxItems',
  'minItems',
  'uniqueItems',
  'maxProperties',
  'minProperties',
  'required',
  'enum',
  'type',
  'allOf',
  'oneOf',
  'anyOf',
  'not',
  'items',
  'properties',
  'additionalProperties',
  'description',
  'format',
  'default',
  'nullable',
  'discriminator',
  'readOnly',
  'writeOnly',
  'xml',
  'externalDocs',
  'example',
  'deprecated',
  '$ref',
]);
const TYPES = new Set(['string', 'number', 'integer', 'boolean', 'array', 'object']);
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/**
 * The problems of `doc` as an OpenAPI 3.0.3 document, each naming where (empty: none). Structural:
 * required fields, path parameters, responses, media types, references, and Schema Objects that
 * use only 3.0's keywords (no `$id`, `const`, type lists or `null` types, which are 3.1's).
 */
export function structuralProblems(doc: OpenApiDocument): string[] {
  const problems: string[] = [];
  const say = (where: string, what: string): void => {
    problems.push(`${where}: ${what}`);
  };
  if (doc.openapi !== '3.0.3') say('openapi', `is ${JSON.stringify(doc.openapi)}, not "3.0.3"`);
  if (typeof doc.info?.title !== 'string' || typeof doc.info?.version !== 'string') say('info', 'needs a title and a version');
  const components: Record<string, unknown> = doc.components?.schemas ?? {};
  const referenced = new Set<string>();
  const schemes = new Set(Object.keys(doc.components?.securitySchemes ?? {}));

  const walkSchema = (where: string, schema: unknown): void => {
    if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return say(where, 'is not a Schema Object');
    const s = schema as Record<string, unknown>;
    for (const key of Object.keys(s)) if (!SCHEMA_KEYWORDS.has(key) && !key.startsWith('x-')) say(where, `has "${key}", not an OpenAPI 3.0 schema keyword`);
    if (typeof s.$ref === 'string') {
      const name = s.$ref.startsWith(SCHEMAS) ? s.$ref.slice(SCHEMAS.length) : undefined;
      if (name === undefined || !(name in components)) say(where, `refers to ${s.$ref}, which is not in components.schemas`);
      else referenced.add(name);
      return;
    }
    if (s.type !== undefined && !(typeof s.type === 'string' && TYPES.has(s.type))) say(where, `type ${JSON.stringify(s.type)} is not one of 3.0's`);
    if (s.nullable !== undefined && s.type === undefined) say(where, 'is nullable without a type');
    for (const k of ['exclusiveMinimum', 'exclusiveMaximum'] as const)
      if (s[k] !== undefined && typeof s[k] !== 'boolean') say(where, `${k} must be a boolean in 3.0`);
    if (s.required !== undefined && !(Array.isArray(s.required) && s.required.length > 0)) say(where, 'required must be a non-empty list');
    for (const [name, p] of Object.entries((s.properties ?? {}) as Record<string, unknown>)) walkSchema(`${where}.properties.${name}`, p);
    if (s.items !== undefined) walkSchema(`${where}.items`, s.items);
    if (typeof s.additionalProperties === 'object') walkSchema(`${where}.additionalProperties`, s.additionalProperties);
    for (const k of ['allOf', 'oneOf', 'anyOf'] as const) ((s[k] ?? []) as unknown[]).forEach((x, i) => walkSchema(`${where}.${k}[${i}]`, x));
  };
  const walkContent = (where: string, content: unknown) => {
    if (typeof content !== 'object' || content === null || Object.keys(content).length === 0) return say(where, 'has no media types');
    for (const [type, media] of Object.entries(content as Record<string, { schema?: unknown }>)) {
      if (!/^[a-z]+\/[a-z0-9.+-]+$/.test(type)) say(where, `${type} is not a media type`);
      if (media.schema === undefined) say(`${where}.${type}`, 'has no schema');
      else walkSchema(`${where}.${type}.schema`, media.schema);
    }
  };

  for (const [name, schema] of Object.entries(components)) walkSchema(`components.schemas.${name}`, schema);
  for (const [path, item] of Object.entries((doc.paths ?? {}) as Record<string, Record<string, OpenApiDocument>>)) {
    if (!path.startsWith('/')) say(path, 'a path must start with /');
    const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
    for (const [method, op] of Object.entries(item)) {
      const where = `${method.toUpperCase()} ${path}`;
      if (!METHODS.includes(method)) {
        say(where, 'is not an HTTP method');
        continue;
      }
      const params = (op.parameters ?? []) as { name: string; in: string; required?: boolean; schema?: unknown }[];
      for (const p of params) {
        if (!['path', 'query', 'header', 'cookie'].includes(p.in)) say(where, `parameter ${p.name} is in "${p.in}"`);
        if (p.schema === undefined) say(where, `parameter ${p.name} has no schema`);
        else walkSchema(`${where} parameter ${p.name}`, p.schema);
        if (p.in === 'path' && (p.required !== true || !templated.includes(p.name))) say(where, `path parameter ${p.name} must be required and in the path`);
      }
      for (const t of templated) if (!params.some((p) => p.in === 'path' && p.name === t)) say(where, `{${t}} has no path parameter`);
      if (op.requestBody !== undefined) walkContent(`${where} requestBody`, op.requestBody.content);
      const responses = Object.entries((op.responses ?? {}) as Record<string, { description?: unknown; content?: unknown }>);
      if (responses.length === 0) say(where, 'has no responses');
      for (const [status, r] of responses) {
        if (!/^[1-5]\d\d$/.test(status) && status !== 'default') say(where, `response ${status} is not a status code`);
        if (typeof r.description !== 'string' || r.description === '' || r.description === 'Default Response')
          say(`${where} ${status}`, 'needs a description of its own');
        if (r.content === undefined) say(`${where} ${status}`, 'says nothing of its body');
        else walkContent(`${where} ${status}`, r.content);
      }
      for (const requirement of (op.security ?? []) as Record<string, unknown>[]) {
        for (const scheme of Object.keys(requirement)) if (!schemes.has(scheme)) say(where, `security names ${scheme}, which components.securitySchemes lacks`);
      }
    }
  }
  for (const name of Object.keys(components)) if (!referenced.has(name)) say(`components.schemas.${name}`, 'is referenced by no operation');
  return problems;
}

/** OpenAPI's `#/components/schemas/X` as the `X#` of a schema registered with Ajv under `$id: X`. */
function toAjvRefs(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(toAjvRefs);
  if (typeof schema !== 'object' || schema === null) return schema;
  return Object.fromEntries(
    Object.entries(schema).map(([k, v]) => [k, k === '$ref' && typeof v === 'string' && v.startsWith(SCHEMAS) ? `${v.slice(SCHEMAS.length)}#` : toAjvRefs(v)]),
  );
}

/** Compiles the document's schemas with Ajv (strict: an unknown keyword fails) and reads answers against them. */
export async function openApiCheck(doc: OpenApiDocument): Promise<OpenApiCheck> {
  const app = Fastify({ ajv: { customOptions: { strict: true, coerceTypes: false, useDefaults: false, removeAdditional: false, allErrors: true } } });
  for (const [name, schema] of Object.entries((doc.components?.schemas ?? {}) as Record<string, object>))
    app.addSchema({ $id: name, ...(toAjvRefs(schema) as object) });
  // Fastify builds its compiler once a route has a schema.
  app.post('/', { schema: { body: { type: 'object' } } }, () => null);
  await app.ready();
  const compiler = app.validatorCompiler as FastifySchemaCompiler<unknown>;
  const compile = (schema: unknown): Validate => compiler({ schema: toAjvRefs(schema) as object, method: 'POST', url: '/', httpPart: 'body' }) as Validate;
  const valid = (v: Validate, data: unknown): string | undefined => {
    const r = v(data);
    if (r === true) return undefined;
    const errors = (v as unknown as { errors?: { instancePath: string; message?: string }[] }).errors ?? [];
    return (
      errors.map((e) => `${e.instancePath || '(root)'} ${e.message ?? ''}`).join('; ') || (typeof r === 'object' ? r.error?.message : undefined) || 'invalid'
    );
  };

  const operations = new Map<
    string,
    { pattern: RegExp; op: OpenApiDocument; answers: Map<string, Map<string, Validate>>; body: Validate | undefined; params: Map<string, Validate> }
  >();
  for (const [path, item] of Object.entries((doc.paths ?? {}) as Record<string, Record<string, OpenApiDocument>>)) {
    const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    // A parameter may be empty, as the API's router takes it (the route's schema then refuses it).
    const pattern = new RegExp(
      `^${path
        .split(/\{[^}]+\}/)
        .map(literal)
        .join('[^/]*')}$`,
    );
    for (const [method, op] of Object.entries(item)) {
      const answers = new Map<string, Map<string, Validate>>();
      for (const [status, r] of Object.entries((op.responses ?? {}) as Record<string, { content?: Record<string, { schema: unknown }> }>)) {
        answers.set(status, new Map(Object.entries(r.content ?? {}).map(([type, media]) => [type, compile(media.schema)])));
      }
      const bodySchema = op.requestBody?.content?.['application/json']?.schema;
      const pathParams = ((op.parameters ?? []) as { name: string; in: string; schema: unknown }[]).filter((p) => p.in === 'path');
      const params = new Map(pathParams.map((p) => [p.name, compile(p.schema)]));
      operations.set(`${method.toUpperCase()} ${path}`, { pattern, op, answers, body: bodySchema === undefined ? undefined : compile(bodySchema), params });
    }
  }

  return {
    doc,
    operations: [...operations.keys()],
    operationOf(method, url) {
      const path = url.split('?')[0]!;
      return [...operations].find(([key, o]) => key.startsWith(`${method.toUpperCase()} `) && o.pattern.test(path))?.[0];
    },
    answerProblem(operation, status, contentType, body) {
      const o = operations.get(operation);
      if (!o) return `${operation} is not documented`;
      const media = o.answers.get(String(status));
      if (!media) return `${operation} answered ${status}, which it does not document (it documents ${[...o.answers.keys()].join(', ')})`;
      const type = (contentType ?? '').split(';')[0]!.trim();
      const validate = media.get(type);
      if (!validate) return `${operation} ${status} answered ${type || 'no content type'}, documented: ${[...media.keys()].join(', ')}`;
      // A HEAD answer has the headers of its GET and no body.
      if (operation.startsWith('HEAD ')) return body === '' ? undefined : `${operation} ${status}: a HEAD answer has a body: ${body.slice(0, 200)}`;
      let data: unknown = body;
      if (type === 'application/json') {
        try {
          data = JSON.parse(body);
        } catch {
          return `${operation} ${status}: the body is not JSON: ${body.slice(0, 200)}`;
        }
      }
      const problem = valid(validate, data);
      return problem === undefined ? undefined : `${operation} ${status}: ${problem}; body ${body.slice(0, 300)}`;
    },
    acceptsBody(operation, body) {
      const validate = operations.get(operation)?.body;
      return validate !== undefined && valid(validate, body) === undefined;
    },
    acceptsPathParameter(operation, name, value) {
      const validate = operations.get(operation)?.params.get(name);
      return validate !== undefined && valid(validate, value) === undefined;
    },
    statusesOf(operation) {
      return [...(operations.get(operation)?.answers.keys() ?? [])];
    },
    methodsAt(url) {
      const path = url.split('?')[0]!;
      return [...operations]
        .filter(([, o]) => o.pattern.test(path))
        .map(([key]) => key.split(' ')[0]!)
        .sort();
    },
    componentProblem(name, data) {
      return valid(compile({ $ref: `${SCHEMAS}${name}` }), data);
    },
  };
}
