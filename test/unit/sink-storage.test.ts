// What each bundled sink declares about its storage (docs/ARCHITECTURE.md §12.3's table), and that
// the node's wrappers keep the declaration: it decides where a copy resumes.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Gate, gatedSink } from '../../src/actors/gate.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import { sinkStorage, type RecordSink } from '../../src/ingest/ingestion-source.js';
import { JsonLinesSink, LogSink } from '../../src/ingest/node-sinks.js';

describe('sink storage declarations', () => {
  it('a sink that declares nothing is per-copy (sinks written before the declaration are unchanged)', () => {
    const old: RecordSink = { accept: () => Promise.resolve() };
    expect(sinkStorage(old)).toBe('per-copy');
  });

  it("the node process's log and JSON-lines sinks are per-copy; the counting sink is per-copy unless told it is one shared store", () => {
    expect(sinkStorage(new LogSink(pino({ level: 'silent' })))).toBe('per-copy');
    expect(sinkStorage(new JsonLinesSink('records.jsonl'))).toBe('per-copy');
    expect(sinkStorage(new CountingSink())).toBe('per-copy');
    expect(sinkStorage(new CountingSink({ storage: 'shared' }))).toBe('shared');
  });

  it("the node's gate passes the declaration through, and adds none", () => {
    const gate = new Gate();
    expect(sinkStorage(gatedSink(new CountingSink({ storage: 'shared' }), gate))).toBe('shared');
    expect(gatedSink({ accept: () => Promise.resolve() }, gate)).not.toHaveProperty('storage');
  });
});
