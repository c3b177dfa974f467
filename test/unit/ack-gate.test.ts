// When a node believes a digest's inbox offset (src/actors/ack-gate.ts): only once it has read
// every acknowledgement the singleton sent before the digest, or once its patience ran out.
import { describe, expect, it } from 'vitest';
import { AckGate } from '../../src/actors/ack-gate.js';

const PATIENCE = 1_000;

describe('AckGate', () => {
  it('holds a digest until the acknowledgements it counts were read, then gives its offset', () => {
    const g = new AckGate(PATIENCE);
    expect(g.acknowledgement(3, 4, 0)).toBeUndefined();
    expect(g.digest(3, 6, 100, 10)).toBeUndefined();
    expect(g.acknowledgement(3, 5, 20)).toBeUndefined();
    expect(g.acknowledgement(3, 6, 30)).toBe(100);
    expect(g.acknowledgement(3, 7, 40)).toBeUndefined(); // given once
  });

  it('gives at once a digest that counts no acknowledgement, or none past those read, or one of an older singleton', () => {
    const g = new AckGate(PATIENCE);
    expect(g.digest(1, 0, 5, 0)).toBe(5);
    expect(g.digest(1, undefined, 6, 0)).toBe(6); // a singleton of an earlier release
    g.acknowledgement(2, 9, 0);
    expect(g.digest(2, 9, 7, 0)).toBe(7);
    expect(g.digest(1, 50, 8, 0)).toBe(8); // the older singleton stopped before the newer acknowledged
  });

  it('gives the largest offset of the digests its acknowledgement releases, not those still waiting', () => {
    const g = new AckGate(PATIENCE);
    expect(g.digest(1, 2, 10, 0)).toBeUndefined();
    expect(g.digest(1, 3, 20, 0)).toBeUndefined();
    expect(g.digest(1, 9, 90, 0)).toBeUndefined();
    expect(g.acknowledgement(1, 3, 5)).toBe(20);
    // A newer singleton's acknowledgement releases what its predecessor's digests wait for.
    expect(g.acknowledgement(2, 1, 6)).toBe(90);
  });

  it('gives a digest whose acknowledgements never come once its patience ran out', () => {
    const g = new AckGate(PATIENCE);
    expect(g.digest(1, 4, 10, 0)).toBeUndefined();
    expect(g.digest(1, 5, 11, PATIENCE - 1)).toBeUndefined();
    expect(g.digest(1, 6, 12, PATIENCE)).toBe(10);
    expect(g.acknowledgement(1, undefined, 2 * PATIENCE)).toBe(12);
  });

  it('keeps a bounded number of digests waiting', () => {
    const g = new AckGate(PATIENCE);
    for (let i = 0; i < 10_000; i++) g.digest(1, 1_000_000, i, 0);
    // Only the newest ones stayed; the acknowledgement that covers them gives the largest.
    expect(g.acknowledgement(1, 1_000_000, 1)).toBe(9_999);
    expect(g.acknowledgement(1, 1_000_000, PATIENCE * 2)).toBeUndefined();
  });
});
