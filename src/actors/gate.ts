// A node process's liveness as its ports see it. A crashed process does nothing more; a paused one
// (SIGSTOP) does nothing until it resumes. Every port a node uses is wrapped in its gate, so an
// in-process node behaves like a real process under those faults: no late writes from the dead.
import type { Bus, BusSubscription } from '../cluster/bus.js';
import type { Cancel, Clock } from '../cluster/clock.js';
import type { IngestionSource, RecordSink, ShardReader } from '../ingest/ingestion-source.js';
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
    produce: async (topic, value) => {
      await gate.pass();
      return bus.produce(topic, value);
    },
    subscribe: async (topic, group, handler, options): Promise<BusSubscription> => {
      await gate.pass();
      return bus.subscribe(topic, group, async (record) => {
        await gate.pass();
        await handler(record);
      }, options);
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

function gatedReader(reader: ShardReader, gate: Gate): ShardReader {
  const g = <T>(op: () => Promise<T>) => gate.pass().then(op);
  const gated: ShardReader = {
    earliestOffset: () => g(() => reader.earliestOffset()),
    endOffset: () => g(() => reader.endOffset()),
    read: (offset, max) => g(() => reader.read(offset, max)),
    // Never blocks: a paused or dead node's note is simply lost (the next one carries it).
    consumed: (next) => {
      if (gate.state === 'running') reader.consumed?.(next);
    },
    close: () => g(() => reader.close()),
  };
  // The optional hints pass through (a reader without them must not seem to have them): a wake-up
  // reaches a paused or dead node's shard never, and its next poll finds the records anyway.
  const whenReadable = reader.whenReadable?.bind(reader);
  const nextRecordAt = reader.nextRecordAt?.bind(reader);
  return {
    ...gated,
    ...(whenReadable ? { whenReadable: (listener: () => void) => whenReadable(() => gate.state === 'running' && listener()) } : {}),
    ...(nextRecordAt ? { nextRecordAt } : {}),
  };
}

export function gatedSource(source: IngestionSource, gate: Gate): IngestionSource {
  const gated: IngestionSource = { open: async (dataset, shard) => gatedReader(await gate.pass().then(() => source.open(dataset, shard)), gate) };
  const validate = source.validate?.bind(source);
  return validate ? { ...gated, validate: (dataset) => gate.pass().then(() => validate(dataset)) } : gated;
}

export function gatedSink(sink: RecordSink, gate: Gate): RecordSink {
  // What the sink declares passes through: it decides where the node's copies resume.
  return { accept: async (dataset, shard, records, token) => gate.pass().then(() => sink.accept(dataset, shard, records, token)), ...(sink.storage ? { storage: sink.storage } : {}) };
}
