// The embedded bus shares one frozen record with every node, and the parse of it too (each node
// reading a 65 536 × 3 map would otherwise decode it again). The shared result is frozen all
// through, so no reader can change it for the others; it is frozen in steps, like the decoding,
// since one task freezing a whole map's 800 000 objects held the demo's event loop for 90 ms.
import { describe, expect, it } from 'vitest';
import { eventsMessageReading, parseEventsMessage, snapshotReading, type EventsRecord } from '../../src/protocol/wire-events.js';
import { WIRE_FORMAT, type EventsMessage } from '../../src/protocol/wire.js';
import { validateDatasetConfig } from '../../src/core/dataset-config.js';
import { datasetRef, epoch, nodeId, shardNum } from '../../src/core/ids.js';
import { frozenJsonCopy } from '../../src/core/json-data.js';
import { encodeEvents, encodeSnapshot } from '../../src/core/map-codec.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { ShardEvents } from '../../src/core/status.js';

const ds = datasetRef('big');
const SHARDS = 16_384;

/** Every object reachable from `value` that is not frozen, by path (the first few). */
function notFrozen(value: unknown, path = '$', out: string[] = []): string[] {
  if (typeof value !== 'object' || value === null || out.length >= 3) return out;
  if (!Object.isFrozen(value)) out.push(path);
  for (const [k, v] of Object.entries(value)) notFrozen(v, `${path}.${k}`, out);
  return out;
}

function stepsOf<T>(steps: Generator<void, T, void>): { yields: number; value: T } {
  let yields = 0;
  for (;;) {
    const next = steps.next();
    if (next.done) return { yields, value: next.value };
    yields++;
  }
}

const config = (() => {
  const r = validateDatasetConfig({ ref: ds, numShards: SHARDS, minNumNodes: 1, replicationFactor: 3, strategy: 'balanced', source: { type: 'synthetic' } });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
})();

describe('a frozen record shared by every reader', () => {
  it('changes: parsed once in steps, the result shared and frozen all through', () => {
    const events = Array.from({ length: SHARDS }, (_, s) => ShardEvents.assignmentStarted(ds, shardNum(s), nodeId(`n${s % 3}`)));
    const message: EventsMessage = {
      format: WIRE_FORMAT,
      kind: 'map-changes',
      epoch: epoch(1),
      dataset: ds,
      numShards: SHARDS,
      base: { epoch: epoch(1), version: 0 },
      changes: encodeEvents(events),
    };
    const value = frozenJsonCopy(message);
    const first = stepsOf(eventsMessageReading(value));
    expect(first.yields).toBeGreaterThanOrEqual(SHARDS / 4096);
    expect(first.value.ok).toBe(true);
    expect(notFrozen(first.value)).toEqual([]);
    expect(parseEventsMessage(value)).toBe(first.value);
  });

  it('a whole map: decoded once in steps, the map shared and frozen all through', () => {
    const mapper = new ShardMapper(SHARDS, ds);
    for (let s = 0; s < SHARDS; s++)
      for (const n of ['a', 'b', 'c'])
        mapper.updateFromEvent(
          s % 2 === 0 && n === 'a' ? ShardEvents.assignmentStarted(ds, shardNum(s), nodeId(n)) : ShardEvents.copyAdded(ds, shardNum(s), nodeId(n)),
        );
    const message: EventsMessage = {
      format: WIRE_FORMAT,
      kind: 'map-snapshot',
      epoch: epoch(1),
      dataset: ds,
      numShards: SHARDS,
      version: mapper.version,
      to: [],
      config,
      snapshot: encodeSnapshot(mapper.toSnapshot(epoch(1))),
    };
    const parsed = parseEventsMessage(frozenJsonCopy(message));
    if (!parsed.ok || parsed.value.kind !== 'map-snapshot') throw new Error(`not a map-snapshot: ${JSON.stringify(parsed).slice(0, 200)}`);
    const record = parsed.value as Extract<EventsRecord, { kind: 'map-snapshot' }>;
    const first = stepsOf(snapshotReading(record));
    expect(first.yields).toBeGreaterThanOrEqual(SHARDS / 4096);
    expect(first.value.ok).toBe(true);
    expect(notFrozen(first.value)).toEqual([]);
    expect(stepsOf(snapshotReading(record)).value).toBe(first.value);
  });
});
