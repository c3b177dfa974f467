// Record labels (src/cluster/bus.ts): bounded on the way out, never trusted on the way in.
import { describe, expect, it } from 'vitest';
import { decodeLabels, encodeLabels, MAX_LABEL_BYTES } from '../../src/cluster/bus.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { MemoryBus } from '../../src/cluster/memory-bus.js';

describe('record labels', () => {
  it('are refused past MAX_LABEL_BYTES, by the in-memory bus too, and nothing is written', async () => {
    const fits = { kind: 'x', text: 'a'.repeat(MAX_LABEL_BYTES - 24) };
    expect(Buffer.byteLength(encodeLabels(fits))).toBeLessThanOrEqual(MAX_LABEL_BYTES);
    const tooLong = { kind: 'x', text: 'a'.repeat(MAX_LABEL_BYTES) };
    expect(() => encodeLabels(tooLong)).toThrow(RangeError);
    const bus = new MemoryBus(new SimulatedClock(0));
    await expect(bus.produce('t', 'value', { labels: tooLong })).rejects.toThrow(/record labels of \d+ bytes/);
    expect(await bus.produce('t', 'value', { labels: fits })).toBe(0); // the refused one took no offset
  });

  it('read back only as an object of strings; anything else reads as no labels (the record is then read)', () => {
    expect(decodeLabels(encodeLabels({ kind: 'map-snapshot', version: '3' }))).toEqual({ kind: 'map-snapshot', version: '3' });
    for (const bad of ['not json', '[]', 'null', '"x"', '{"version":3}', '{"a":{"b":"c"}}']) expect(decodeLabels(bad)).toBeUndefined();
  });
});
