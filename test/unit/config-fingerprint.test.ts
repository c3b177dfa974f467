// A dataset's config fingerprint travels in every map snapshot's labels: a node compares it with the
// config it knows to tell whether a snapshot needs reading. Equal configs must give equal
// fingerprints whatever the order of their keys, and another config another one, also when the
// fingerprints are remembered per config object.
import { describe, expect, it } from 'vitest';
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import { configFingerprint } from '../../src/protocol/wire-events.js';

function config(input: Record<string, unknown>): DatasetConfig {
  const r = validateDatasetConfig(input);
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

const base = { ref: 'metrics', numShards: 8, minNumNodes: 2, source: { type: 'kafka', topic: 'metrics' } };

describe('configFingerprint', () => {
  it('is the same for equal configs whose keys come in another order, asked once or many times', () => {
    const a = config(base);
    const b = config({ source: { topic: 'metrics', type: 'kafka' }, minNumNodes: 2, numShards: 8, ref: 'metrics' });
    expect(a).not.toBe(b);
    expect(configFingerprint(a)).toBe(configFingerprint(b));
    expect(configFingerprint(a)).toBe(configFingerprint(a));
    expect(configFingerprint(a)).toMatch(/^[\w-]{27}$/);
  });

  it('differs for configs that differ in any field, each asked after the other was', () => {
    const a = config(base);
    const fingerprintA = configFingerprint(a);
    for (const other of [
      { ...base, numShards: 16 },
      { ...base, minNumNodes: 3 },
      { ...base, strategy: 'balanced' },
      { ...base, source: { type: 'kafka', topic: 'other' } },
    ]) {
      const b = config(other);
      expect(configFingerprint(b)).not.toBe(fingerprintA);
      expect(configFingerprint(a)).toBe(fingerprintA);
    }
  });
});
