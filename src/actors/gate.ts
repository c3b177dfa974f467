// A node process's liveness as its ports see it. A crashed process does nothing more; a paused one
// (SIGSTOP) does nothing until it resumes. Every port a node uses is wrapped in its gate, so an
// in-process node behaves like a real process under those faults: no late writes from the dead.
import type { Bus, BusSubscription } from '../cluster/bus.js';
import type { Cancel, Clock } from '../cluster/clock.js';
import type { IngestionSource, RecordSink, ShardReader, SourceRecord } from '../ingest/ingestion-source.js';
import type { MetaStore } from '../store/meta-store.js';

export type GateState = 'running' | 'paused' | 'dead';

export class Gate {
  private current: GateState = 'running';
  private waiting: (() => void)[] = [];

  get state(): GateState {
    return this.current;
  }

  /** Resolves when the process may go on: at once if running, after `resume` if paused, never if dead. */
  pass(): Promise<void> {
    if (this.current === 'running') return Promise.resolve();
    if (this.current === 'dead') return new Promise(() => {});
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  pause(): void {
    if (this.current === 'running') this.current = 'paused';
  }

  resume(): void {
    if (this.current !== 'paused') return;
    this.current = 'running';
    const w = this.waiting;
    this.waiting = [];
    for (const resolve of w) resolve();
  }

  kill(): void {
    this.current = 'dead';
    this.waiting = [];
  }
}

export function gatedClock(clock: Clock, gate: Gate): Clock {
  return {
    now: () => clock.now(),
    schedule: (ms: number, fn: () => void): Cancel =>
      clock.schedule(ms, () => {
        if (gate.state === 'running') fn();
        else void gate.pass().then(fn);
      }),
  };
}

export function gatedBus(bus: Bus, gate: Gate): Bus {
  return {
    produce: async (topic, value, options) => {
      await gate.pass();
      return bus.produce(topic, value, options);
    },
    subscribe: async (topic, group, handler, options): Promise<BusSubscription> => {
      await gate.pass();
      return bus.subscribe(
        topic,
        group,
        async (record) => {
          await gate.pass();
          await handler(record);
        },
        options,
      );
    },
    committedOffset: async (topic, group) => {
      await gate.pass();
      return bus.committedOffset(topic, group);
    },
  };
}

export function gatedMetaStore(store: MetaStore, gate: Gate): MetaStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        await gate.pass();
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/**
 * A reader behind its node's gate. A class, not an object of closures: a node holds one per shard
 * copy (tens of thousands), and an object literal with optional members got a hidden class of its
 * own per reader (about 0.7 KB each).
 */
class GatedReader implements ShardReader {
  constructor(
    private readonly reader: ShardReader,
    private readonly gate: Gate,
  ) {}

  earliestOffset(): Promise<number> {
    return this.gate.pass().then(() => this.reader.earliestOffset());
  }

  endOffset(): Promise<number> {
    return this.gate.pass().then(() => this.reader.endOffset());
  }

  read(offset: number, max: number): Promise<SourceRecord[]> {
    return this.gate.pass().then(() => this.reader.read(offset, max));
  }

  /** Never blocks: a paused or dead node's note is simply lost (the next one carries it). */
  consumed(next: number): void {
    if (this.gate.state === 'running') this.reader.consumed?.(next);
  }

  close(): Promise<void> {
    return this.gate.pass().then(() => this.reader.close());
  }

  // The optional hints pass through: a wake-up reaches a paused or dead node's shard never, and its
  // next poll finds the records anyway.
  whenReadable(listener: () => void): void {
    this.reader.whenReadable?.(() => this.gate.state === 'running' && listener());
  }

  nextRecordAt(): number | undefined {
    return this.reader.nextRecordAt?.();
  }

  knownEndOffset(): number | undefined {
    return this.reader.knownEndOffset?.();
  }
}

export function gatedSource(source: IngestionSource, gate: Gate): IngestionSource {
  const gated: IngestionSource = { open: async (dataset, shard) => new GatedReader(await gate.pass().then(() => source.open(dataset, shard)), gate) };
  const validate = source.validate?.bind(source);
  return validate ? { ...gated, validate: (dataset) => gate.pass().then(() => validate(dataset)) } : gated;
}

export function gatedSink(sink: RecordSink, gate: Gate): RecordSink {
  // What the sink declares passes through: it decides where the node's copies resume.
  return {
    accept: async (dataset, shard, records, token) => gate.pass().then(() => sink.accept(dataset, shard, records, token)),
    ...(sink.storage ? { storage: sink.storage } : {}),
  };
}
