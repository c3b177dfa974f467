// validateDatasetConfig: defaults, and refusals as values naming the first bad field.
import { describe, expect, it } from 'vitest';
import { type DatasetConfig, datasetConfigDifferences, validateDatasetConfig } from '../../src/core/dataset-config.js';

const minimal = { ref: 'metrics', numShards: 8, minNumNodes: 2, source: { type: 'synthetic' } };

/** The validated config, or a test failure naming the refused field. */
function valid(input: unknown): DatasetConfig {
  const r = validateDatasetConfig(input);
  if (!r.ok) throw new Error(`expected a valid config, got ${JSON.stringify(r.error)}`);
  return r.value;
}

/** The refusal, or a test failure. */
function refusal(input: unknown): { type: string; field: string; message: string } {
  const r = validateDatasetConfig(input);
  if (r.ok) throw new Error(`expected a refusal, got ${JSON.stringify(r.value)}`);
  return r.error;
}

const fieldOf = (input: unknown): string => refusal(input).field;

describe('validateDatasetConfig: defaults', () => {
  it("a minimal config gets spread 1, replicationFactor 1, FiloDB's strategy and 100 records per second", () => {
    expect(valid(minimal)).toEqual({
      ref: 'metrics',
      numShards: 8,
      minNumNodes: 2,
      spread: 1,
      replicationFactor: 1,
      strategy: 'filodb-default',
      maxConcurrentMoves: 16,
      copyStartFrom: 'earliest',
      replacementDelayMs: 0,
      source: { type: 'synthetic', recordsPerSecond: 100 },
    });
  });

  it("replacementDelayMs: 60 s for balanced datasets by default, always 0 for FiloDB's, refused when negative, fractional or not a number", () => {
    const balanced = { ...minimal, replicationFactor: 2, strategy: 'balanced' };
    expect(valid(balanced).replacementDelayMs).toBe(60_000);
    expect(valid({ ...balanced, replacementDelayMs: 0 }).replacementDelayMs).toBe(0);
    expect(valid({ ...balanced, replacementDelayMs: 5_000 }).replacementDelayMs).toBe(5_000);
    expect(valid(minimal).replacementDelayMs).toBe(0);
    expect(valid({ ...minimal, replacementDelayMs: 0 }).replacementDelayMs).toBe(0);
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '60000', null, 24 * 60 * 60 * 1000 + 1]) {
      const e = refusal({ ...balanced, replacementDelayMs: bad });
      expect(e.field).toBe('replacementDelayMs');
      expect(e.message).toMatch(/^replacementDelayMs /);
    }
    const filodb = refusal({ ...minimal, replacementDelayMs: 1_000 });
    expect(filodb.field).toBe('replacementDelayMs');
    expect(filodb.message).toMatch(/needs "strategy": "balanced"/);
    expect(datasetConfigDifferences(valid(balanced), valid({ ...balanced, replacementDelayMs: 5_000 }))).toEqual(['replacementDelayMs']);
    expect(datasetConfigDifferences(valid(balanced), valid({ ...balanced, replacementDelayMs: 60_000 }))).toEqual([]);
  });

  it('copyStartFrom takes earliest or serving-copies, and refuses anything else naming both', () => {
    expect(valid({ ...minimal, copyStartFrom: 'serving-copies' }).copyStartFrom).toBe('serving-copies');
    const e = refusal({ ...minimal, copyStartFrom: 'latest' });
    expect(e.field).toBe('copyStartFrom');
    expect(e.message).toBe('copyStartFrom must be "earliest" (the earliest retained offset) or "serving-copies" (the furthest checkpoint of the other copies)');
    expect(datasetConfigDifferences(valid(minimal), valid({ ...minimal, copyStartFrom: 'serving-copies' }))).toEqual(['copyStartFrom']);
  });

  it('replicas with the balanced strategy are accepted', () => {
    const c = valid({ ...minimal, replicationFactor: 3, strategy: 'balanced', maxConcurrentMoves: 4 });
    expect(c).toMatchObject({ replicationFactor: 3, strategy: 'balanced', maxConcurrentMoves: 4 });
  });

  it('a single-shard dataset gets default spread 0', () => {
    expect(valid({ ...minimal, numShards: 1 }).spread).toBe(0);
  });

  it('a Kafka source starts from the earliest offset by default', () => {
    expect(valid({ ...minimal, source: { type: 'kafka', topic: 'metrics.v1' } }).source).toEqual({
      type: 'kafka',
      topic: 'metrics.v1',
      startFrom: 'earliest',
    });
  });

  it('explicit values are kept: spread up to log2(numShards), startFrom latest, a custom rate', () => {
    expect(valid({ ...minimal, spread: 3 }).spread).toBe(3);
    expect(valid({ ...minimal, spread: 0 }).spread).toBe(0);
    expect(valid({ ...minimal, source: { type: 'kafka', topic: 't', startFrom: 'latest' } }).source).toMatchObject({ startFrom: 'latest' });
    expect(valid({ ...minimal, source: { type: 'synthetic', recordsPerSecond: 5 } }).source).toEqual({ type: 'synthetic', recordsPerSecond: 5 });
  });

  it('accepts the edges: 1 and 65536 shards, a 64-character ref', () => {
    expect(valid({ ...minimal, numShards: 65536 }).numShards).toBe(65536);
    expect(valid({ ...minimal, numShards: 1 }).numShards).toBe(1);
    expect(valid({ ...minimal, ref: 'a'.repeat(64) }).ref).toBe('a'.repeat(64));
  });
});

describe('validateDatasetConfig: refusals are values naming the field', () => {
  it('refusals have type InvalidDatasetConfig and a message that starts with the field', () => {
    const e = refusal({ ...minimal, numShards: 0 });
    expect(e.type).toBe('InvalidDatasetConfig');
    expect(e.message.startsWith('numShards ')).toBe(true);
  });

  it.each([
    ['0', 0],
    ['34 (not a power of two)', 34],
    ['131072 (above 65536)', 131072],
    ['3.5', 3.5],
    ['a string', '8'],
  ])('numShards %s → field numShards', (_label, numShards) => {
    expect(fieldOf({ ...minimal, numShards })).toBe('numShards');
  });

  it.each([0, 1.5])('minNumNodes %s → field minNumNodes', (minNumNodes) => {
    expect(fieldOf({ ...minimal, minNumNodes })).toBe('minNumNodes');
  });

  it('spread -1 and spread log2(numShards) + 1 → field spread', () => {
    expect(fieldOf({ ...minimal, spread: -1 })).toBe('spread');
    expect(fieldOf({ ...minimal, spread: Math.log2(8) + 1 })).toBe('spread');
    expect(fieldOf({ ...minimal, numShards: 1, spread: 1 })).toBe('spread');
  });

  it("replicationFactor 2 with FiloDB's strategy → field replicationFactor, naming the strategy it needs", () => {
    const e = refusal({ ...minimal, replicationFactor: 2 });
    expect(e.field).toBe('replicationFactor');
    expect(e.message).toMatch(/balanced/);
    expect(fieldOf({ ...minimal, replicationFactor: 0, strategy: 'balanced' })).toBe('replicationFactor');
    expect(fieldOf({ ...minimal, replicationFactor: 9, strategy: 'balanced' })).toBe('replicationFactor');
  });

  it('an unknown strategy or a maxConcurrentMoves below 1 → that field', () => {
    expect(fieldOf({ ...minimal, strategy: 'round-robin' })).toBe('strategy');
    expect(fieldOf({ ...minimal, maxConcurrentMoves: 0 })).toBe('maxConcurrentMoves');
    expect(fieldOf({ ...minimal, maxConcurrentMoves: 1.5 })).toBe('maxConcurrentMoves');
  });

  it('a missing source → field source, reported as required', () => {
    const e = refusal({ ref: 'metrics', numShards: 8, minNumNodes: 2 });
    expect(e.field).toBe('source');
    expect(e.message).toMatch(/required/);
  });

  it("source.type 'nope' → field source.type", () => {
    expect(fieldOf({ ...minimal, source: { type: 'nope' } })).toBe('source.type');
  });

  it("a Kafka topic 'bad topic!' → field source.topic", () => {
    expect(fieldOf({ ...minimal, source: { type: 'kafka', topic: 'bad topic!' } })).toBe('source.topic');
  });

  it.each([
    ['empty', ''],
    ['starting with a digit', '9abc'],
    ['with a space', 'has space'],
    ['65 characters', 'a'.repeat(65)],
  ])('a ref %s → field ref', (_label, ref) => {
    expect(fieldOf({ ...minimal, ref })).toBe('ref');
  });

  it('an unknown top-level key is refused, naming that key (a typo cannot fall back to a default)', () => {
    expect(fieldOf({ ...minimal, numShard: 8 })).toBe('numShard');
    // a typo of an optional key would otherwise silently mean "use the default spread"
    expect(fieldOf({ ...minimal, spreads: 3 })).toBe('spreads');
  });

  it('an unknown key inside the source is refused with its dotted path', () => {
    expect(fieldOf({ ...minimal, source: { type: 'synthetic', rps: 5 } })).toBe('source.rps');
  });

  it('a typo in place of a required key is reported as the typo, the cause, not as the missing key', () => {
    const { numShards: _dropped, ...rest } = minimal;
    const e = refusal({ ...rest, numShard: 8 });
    expect(e.field).toBe('numShard');
  });

  it.each([
    ['null', null],
    ['a string', 'metrics'],
    ['an array', []],
  ])('input %s is refused with some field', (_label, input) => {
    const r = validateDatasetConfig(input);
    expect(r.ok).toBe(false);
    expect(r.ok === false && r.error.field.length).toBeGreaterThan(0);
  });

  it('a value of the wrong type is not reported as missing', () => {
    // The key is present; "is required" would send the user looking for a key they did write.
    for (const [input, field] of [
      [{ ...minimal, numShards: '8' }, 'numShards'],
      [{ ...minimal, minNumNodes: 1.5 }, 'minNumNodes'],
      [{ ...minimal, spread: 'one' }, 'spread'],
    ] as const) {
      const e = refusal(input);
      expect(e.field).toBe(field);
      expect(e.message).not.toMatch(/required/);
    }
  });
});

describe('datasetConfigDifferences', () => {
  it('equal configs have no differences, whatever the key order of the source', () => {
    const a = valid({ ...minimal, source: { type: 'kafka', topic: 't', startFrom: 'latest' } });
    const b = valid({ ...minimal, source: { startFrom: 'latest', topic: 't', type: 'kafka' } });
    expect(datasetConfigDifferences(a, b)).toEqual([]);
  });

  it('names each differing field', () => {
    expect(datasetConfigDifferences(valid(minimal), valid({ ...minimal, minNumNodes: 3 }))).toEqual(['minNumNodes']);
    expect(
      datasetConfigDifferences(valid(minimal), valid({ ...minimal, numShards: 16, spread: 2, source: { type: 'synthetic', recordsPerSecond: 7 } })),
    ).toEqual(['numShards', 'spread', 'source']);
  });
});
