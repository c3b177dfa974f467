/**
 * A whole map and a join wave's changes on the bus, compact (format 3) against packed (format 4),
 * in process: the map of 65 536 shards × 3 copies on six nodes with 40-character ids, and 65 536
 * changes (a copy added and started on each of 32 768 shards, as a wave's round makes). A reader
 * parses a record's JSON in one call that cannot be cut into slices, then decodes it in steps of a
 * thousand; the longest of those is what a node's event loop waits behind. Rounds alternate the
 * formats, a full collection before each timed run; medians.
 */
import { deepStrictEqual } from 'node:assert/strict';
import { datasetRef, epoch, nodeId, shardNum, type NodeId } from '../src/core/ids.js';
import { decodeEvents, decodeSnapshot, encodeEvents, encodeSnapshot, eventsDecoding, packSnapshot, snapshotDecoding } from '../src/core/map-codec.js';
import { packEvents } from '../src/core/packed-events.js';
import { ShardMapper } from '../src/core/shard-mapper.js';
import type { Steps } from '../src/core/steps.js';
import { type ShardEvent, ShardEvents } from '../src/core/status.js';
import { collectGarbage, ms, quantile, register, type Table } from './harness.js';

const SHARDS = 65_536;
const ROUNDS = 9;
const ds = datasetRef('metrics');
const nodes: NodeId[] = Array.from({ length: 6 }, (_, i) => nodeId(`ingest-${i + 1}.prod-eu-west-1.example.internal`));

function wholeMap(): ShardMapper {
  const m = new ShardMapper(SHARDS, ds);
  for (let s = 0; s < SHARDS; s++) {
    for (let k = 0; k < 3; k++) {
      const node = nodes[(s + 2 * k) % nodes.length]!;
      if (k > 0) m.updateFromEvent(ShardEvents.copyAdded(ds, shardNum(s), node));
      m.updateFromEvent(ShardEvents.ingestionStarted(ds, shardNum(s), node));
    }
  }
  return m;
}

function waveChanges(): ShardEvent[] {
  const events: ShardEvent[] = [];
  for (let s = 0; s < SHARDS / 2; s++) {
    const node = nodes[(s + 1) % nodes.length]!;
    events.push(ShardEvents.copyAdded(ds, shardNum(s), node), ShardEvents.ingestionStarted(ds, shardNum(s), node));
  }
  return events;
}

/** Times each step of `steps`: the total and the longest, ms. */
function stepTimes<T>(steps: Steps<T>): { total: number; longest: number; value: T } {
  let longest = 0;
  let total = 0;
  for (;;) {
    const t0 = performance.now();
    const next = steps.next();
    const took = performance.now() - t0;
    total += took;
    longest = Math.max(longest, took);
    if (next.done) return { total, longest, value: next.value };
  }
}

interface Case {
  readonly text: string;
  /** The record's reading: JSON.parse, then decoding in steps. */
  readonly read: (raw: unknown) => Steps<unknown>;
  readonly encode: () => string;
}

register({
  name: 'map-format',
  run: (): Table => {
    const snapshot = wholeMap().toSnapshot(epoch(1));
    const events = waveChanges();
    const cases: Record<string, Case> = {
      'map compact': { text: JSON.stringify(encodeSnapshot(snapshot)), read: snapshotDecoding, encode: () => JSON.stringify(encodeSnapshot(snapshot)) },
      'map packed': { text: JSON.stringify(packSnapshot(snapshot)), read: snapshotDecoding, encode: () => JSON.stringify(packSnapshot(snapshot)) },
      'changes compact': {
        text: JSON.stringify(encodeEvents(events)),
        read: (raw) => eventsDecoding(raw, ds, SHARDS),
        encode: () => JSON.stringify(encodeEvents(events)),
      },
      'changes packed': {
        text: JSON.stringify(packEvents(events)),
        read: (raw) => eventsDecoding(raw, ds, SHARDS),
        encode: () => JSON.stringify(packEvents(events)),
      },
    };
    // Like with like: both formats read back to the same map and the same events.
    deepStrictEqual(decodeSnapshot(JSON.parse(cases['map packed']!.text)), decodeSnapshot(JSON.parse(cases['map compact']!.text)));
    deepStrictEqual(decodeEvents(JSON.parse(cases['changes packed']!.text), ds, SHARDS), decodeEvents(JSON.parse(cases['changes compact']!.text), ds, SHARDS));

    const times: Record<string, { parse: number[]; step: number[]; decode: number[]; encode: number[] }> = {};
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, c] of Object.entries(cases)) {
        const t = (times[name] ??= { parse: [], step: [], decode: [], encode: [] });
        collectGarbage();
        let t0 = performance.now();
        const raw = JSON.parse(c.text) as unknown;
        t.parse.push(performance.now() - t0);
        const read = stepTimes(c.read(raw));
        t.step.push(read.longest);
        t.decode.push(read.total);
        collectGarbage();
        t0 = performance.now();
        c.encode();
        t.encode.push(performance.now() - t0);
      }
    }
    const median = (v: number[]) => ms(quantile(v, 0.5));
    const row = (name: string) => {
      const t = times[name]!;
      return [name, `${(cases[name]!.text.length / 1e6).toFixed(2)} MB`, median(t.parse), median(t.step), median(t.decode), median(t.encode)];
    };
    const ratio = (what: 'parse', a: string, b: string) => (quantile(times[a]![what], 0.5) / quantile(times[b]![what], 0.5)).toFixed(1);
    return {
      title: `A whole map (${SHARDS.toLocaleString('en')} shards × 3 copies, 6 nodes) and a wave's changes (${events.length.toLocaleString('en')} events), compact against packed (ms)`,
      columns: ['record', 'JSON', 'JSON.parse (one task)', 'longest decoding step', 'decoding, all steps', 'encoding and JSON.stringify'],
      rows: Object.keys(cases).map(row),
      notes: [
        `Medians of ${ROUNDS} alternating rounds, a full garbage collection before each timed part; both formats read back equal (checked before timing).`,
        `JSON.parse, the one part of reading a record that runs as one task: compact / packed = ${ratio('parse', 'map compact', 'map packed')}× for the map, ${ratio('parse', 'changes compact', 'changes packed')}× for the changes.`,
      ],
    };
  },
});
