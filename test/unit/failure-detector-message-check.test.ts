// The detector's check of a frame without zod (messages.ts, `conformingMessage`) stands in for
// zod's parse of every conforming frame: it must never accept what the schema refuses, must give
// exactly what zod gives (keys in the same order), and must accept every message a node sends (or
// the fast path would be no faster). Checked on messages of every type, and on each of them with one
// field changed, removed or added, near the schema's bounds and at random.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  conformingMessage,
  DETECTOR_FORMAT,
  detectorMessageSchema,
  encodeFrame,
  VOTES,
  type DetectorMessage,
} from '../../src/cluster/failure-detector/messages.js';
import { incarnation, nodeId } from '../../src/core/ids.js';

const a = { node: nodeId('a'), incarnation: incarnation('a-1') };
const s = { node: nodeId('s.2_x-y'), incarnation: incarnation('s~!{}') };
const base = { format: DETECTOR_FORMAT, cluster: 'metrics', from: a, to: s, seq: 7 } as const;

const MESSAGES: DetectorMessage[] = [
  { ...base, type: 'heartbeat' },
  { ...base, type: 'heartbeat', stalledMs: 1200 },
  { ...base, from: s, to: a, type: 'grant', epoch: 3, leaseMs: 500, heartbeatIntervalMs: 100 },
  { ...base, from: s, to: a, type: 'evicted', epoch: 0 },
  { ...base, type: 'ping' },
  { ...base, type: 'ack' },
  { ...base, from: s, type: 'ping-req', epoch: 3, target: a, address: '10.0.0.7:7100' },
  { ...base, type: 'vote', target: a, vote: 'refused' },
  { ...base, type: 'goodbye' },
  { ...base, from: s, type: 'singleton', epoch: 4, address: '10.0.0.9:7100' },
];

/** Values near the schema's bounds, and of the wrong kinds, as JSON text can carry them. */
const EDGES: unknown[] = [
  0,
  -0,
  1,
  -1,
  1.5,
  2 ** 53 - 1,
  2 ** 53,
  3_600_000,
  3_600_001,
  Infinity,
  -Infinity,
  '',
  'x',
  'x'.repeat(200),
  'x'.repeat(201),
  'x'.repeat(300),
  'x'.repeat(301),
  ' a',
  'a b',
  '.a',
  'é',
  'x'.repeat(128),
  'x'.repeat(129),
  'x'.repeat(256),
  'x'.repeat(257),
  null,
  true,
  [],
  {},
  [1],
  { node: 'a' },
  a,
  s,
  { ...a, extra: 1 },
  'alive',
  'silent',
  'unsure',
  'maybe',
  'heartbeat',
  'grant',
  'ping-req',
  'hello',
  DETECTOR_FORMAT,
  '1',
  2,
];
const anyValue = fc.oneof(fc.constantFrom(...EDGES), fc.jsonValue());
const FIELDS = [
  'format',
  'cluster',
  'from',
  'to',
  'seq',
  'type',
  'stalledMs',
  'epoch',
  'leaseMs',
  'heartbeatIntervalMs',
  'target',
  'address',
  'vote',
  'node',
  'incarnation',
  '__proto__',
  'constructor',
  'lease',
];

/** Reads `value` as a receiver would: through JSON text (so Infinity becomes what JSON.parse makes of 1e999). */
const asReceived = (value: unknown): unknown =>
  JSON.parse(
    JSON.stringify(value, (_k, v: unknown) => (v === Infinity ? '__inf__' : v === -Infinity ? '__-inf__' : v))
      .replaceAll('"__inf__"', '1e999')
      .replaceAll('"__-inf__"', '-1e999'),
  );

function agree(json: unknown): void {
  const fast = conformingMessage(json);
  const zod = detectorMessageSchema.safeParse(json);
  if (fast !== undefined) {
    expect(zod.success, `accepted what zod refuses: ${JSON.stringify(json)}`).toBe(true);
    // The same message, keys in the same order (what the receiver gets must not depend on the path).
    expect(JSON.stringify(fast)).toBe(JSON.stringify(zod.data));
  }
}

/** `m` with one field (possibly nested in a member) set to `value`, or removed when `value` is undefined. */
function changed(m: DetectorMessage, path: readonly string[], value: unknown): unknown {
  const copy = JSON.parse(JSON.stringify(m)) as Record<string, unknown>;
  let at: Record<string, unknown> = copy;
  for (const p of path.slice(0, -1)) {
    if (typeof at[p] !== 'object' || at[p] === null) return copy;
    at = at[p] as Record<string, unknown>;
  }
  const last = path.at(-1)!;
  if (value === undefined) delete at[last];
  else Object.defineProperty(at, last, { value, enumerable: true, configurable: true, writable: true });
  return copy;
}

describe('the detector frame check without zod', () => {
  it.each(MESSAGES.map((m) => [m.type, m] as const))('accepts a %s as zod reads it', (_type, m) => {
    const json = JSON.parse(encodeFrame(m)) as unknown;
    expect(conformingMessage(json)).toBeDefined();
    agree(json);
  });

  it('accepts nothing zod refuses: every message with one field changed, removed or added', () => {
    for (const m of MESSAGES) {
      for (const field of FIELDS) {
        for (const path of [[field], ['from', field], ['to', field], ['target', field]]) {
          agree(asReceived(changed(m, path, undefined)));
          for (const v of EDGES) agree(asReceived(changed(m, path, v)));
        }
      }
    }
  });

  it('accepts nothing zod refuses: random changes to random messages', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...MESSAGES),
        fc.array(fc.tuple(fc.constantFrom(...FIELDS), fc.constantFrom('', 'from', 'to', 'target'), fc.option(anyValue, { nil: undefined })), { maxLength: 3 }),
        (m, changes) => {
          let json: unknown = m;
          for (const [field, inside, value] of changes) json = changed(json as DetectorMessage, inside ? [inside, field] : [field], value);
          agree(asReceived(json));
        },
      ),
      { numRuns: 3_000 },
    );
  });

  it('agrees with zod on arbitrary JSON', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => agree(v)),
      { numRuns: 2_000 },
    );
    for (const vote of VOTES) agree({ ...base, type: 'vote', target: a, vote });
  });
});
