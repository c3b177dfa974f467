// The fetch thread: a worker thread of the source where the client library's consumers fetch and
// unpack Kafka's answers and pack them into runs (./run-consumer.ts). Decoding a fetch answer is
// most of ingestion's work (kafkajs unpacks 8 MiB, about 160 000 small records, in one go); on the
// main thread it held up the node's event loop, where the failure detector answers and requests are
// served, and it took the same core as the records' reading and sinks. Here it runs beside them.
// The reads, the decoder and the buffers stay on the main thread; only runs cross, their buffers
// transferred, not copied.
import type { Worker } from 'node:worker_threads';
import { pino, type Logger } from 'pino';
import { startModuleWorker } from '../../cluster/module-worker.js';
import type { Room } from './batch-estimate.js';
import type { FeedConsumerStats } from './feed-client.js';
import { FetchedRun } from './fetched-run.js';
import { errorOf, type BatchMessage, type FetchThreadInit, type FromFetchThread, type ToFetchThread } from './fetch-thread-protocol.js';
import type { RunConsumer, RunConsumerEvents, RunConsumerParams } from './run-consumer.js';

/** Omits `call` from each message type that has one. */
type CallMessage = ToFetchThread extends infer M ? (M extends { call: number } ? Omit<M, 'call'> : never) : never;

/** One fetch thread per source, started with its first consumer; a thread that dies is started again by the next open. */
export class FetchThread {
  private worker: Worker | undefined;
  private readonly consumers = new Map<number, ThreadRunConsumer>();
  private readonly calls = new Map<number, () => void>();
  private nextId = 1;
  private nextCall = 1;
  private closed = false;

  constructor(
    private readonly init: FetchThreadInit,
    private readonly log: Logger,
    /** Starts the thread (tests start stand-ins). */
    private readonly startWorker: (init: FetchThreadInit) => Worker = startFetchThread,
  ) {}

  consumer(params: RunConsumerParams, events: RunConsumerEvents): RunConsumer {
    const consumer = new ThreadRunConsumer(this, this.nextId++, params, events);
    this.consumers.set(consumer.id, consumer);
    if (this.worker !== undefined) this.open(this.worker, consumer);
    return consumer;
  }

  /** Sends a message, starting the thread (and opening every consumer on it) if it is not running. */
  post(message: ToFetchThread): void {
    if (this.closed) return;
    this.running().postMessage(message);
  }

  /** Sends a message that the thread answers once it has done it; resolves at once without a thread. */
  call(message: CallMessage): Promise<void> {
    const worker = this.worker;
    if (worker === undefined) return Promise.resolve();
    const call = this.nextCall++;
    return new Promise((resolve) => {
      this.calls.set(call, resolve);
      worker.postMessage({ ...message, call });
    });
  }

  forget(id: number): void {
    this.consumers.delete(id);
  }

  /** After every consumer's shutdown: the thread disconnects its client and ends. */
  async close(): Promise<void> {
    const worker = this.worker;
    if (worker !== undefined) await this.call({ type: 'close' });
    this.closed = true;
    this.worker = undefined;
    await worker?.terminate();
  }

  private running(): Worker {
    if (this.worker !== undefined) return this.worker;
    const worker = this.startWorker(this.init);
    worker.on('message', (m: FromFetchThread) => this.onMessage(m));
    worker.on('error', (e) => this.onEnd(worker, e));
    worker.on('exit', (code) => this.onEnd(worker, new Error(`the Kafka fetch thread exited with code ${code}`)));
    this.worker = worker;
    for (const c of this.consumers.values()) this.open(worker, c);
    return worker;
  }

  private open(worker: Worker, c: ThreadRunConsumer): void {
    worker.postMessage({ type: 'open', id: c.id, dataset: c.params.dataset, topic: c.params.topic } satisfies ToFetchThread);
  }

  private onMessage(m: FromFetchThread): void {
    if (m.type === 'log') return this.relog(m.line);
    if (m.type === 'done') {
      this.calls.get(m.call)?.();
      this.calls.delete(m.call);
      return;
    }
    const c = this.consumers.get(m.id);
    if (c === undefined) return;
    switch (m.type) {
      case 'join':
        return c.events.onJoin(m.assigned);
      case 'batch':
        return c.events.onBatch(batchOf(m.batch));
      case 'stats':
        c.lastStats = m.stats;
        return;
      case 'fail':
        return c.events.onFail(errorOf(m.error));
    }
  }

  /** The thread stopped unasked (an error its code did not catch): every dataset's reads fail until a shard is opened again, which starts it anew. */
  private onEnd(worker: Worker, e: Error): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    for (const resolve of this.calls.values()) resolve();
    this.calls.clear();
    this.log.error({ err: e }, 'the Kafka fetch thread stopped; reads of its datasets fail until a shard is opened again');
    for (const c of this.consumers.values()) c.events.onFail(e);
  }

  /** A line of the thread's log, logged again here at its level with its fields (the time is this thread's). */
  private relog(line: string): void {
    let entry: Record<string, unknown>;
    try {
      entry = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    const { level, msg, ...fields } = entry;
    const label = typeof level === 'number' ? pino.levels.labels[level] : undefined;
    const method = label === 'fatal' || label === 'error' || label === 'warn' || label === 'info' || label === 'debug' || label === 'trace' ? label : 'info';
    this.log[method](fields, typeof msg === 'string' ? msg : '');
  }
}

function startFetchThread(init: FetchThreadInit): Worker {
  return startModuleWorker(import.meta.url, 'fetch-thread-worker', { workerData: init, name: 'shardherd kafka fetch' });
}

function batchOf(m: BatchMessage) {
  return { ...m, run: m.run === undefined ? undefined : FetchedRun.fromParts(m.run) };
}

/** A dataset's consumer on the fetch thread, as the feed on the main thread holds it. */
class ThreadRunConsumer implements RunConsumer {
  /** What the thread last said of the consumer (it says so whenever it changes). */
  lastStats: FeedConsumerStats = { groupId: undefined, assigned: [], generations: 0, lastRecreateMs: undefined };

  constructor(
    private readonly thread: FetchThread,
    readonly id: number,
    readonly params: RunConsumerParams,
    readonly events: RunConsumerEvents,
  ) {}

  schedule(delayMs: number, wanted: readonly number[]): void {
    this.thread.post({ type: 'schedule', id: this.id, delayMs, wanted: [...wanted] });
  }

  start(partition: number, offset: number, epoch: number, room: Room): void {
    this.thread.post({ type: 'start', id: this.id, partition, offset, epoch, room });
  }

  grant(partition: number, epoch: number, room: Room): void {
    this.thread.post({ type: 'grant', id: this.id, partition, epoch, room });
  }

  stop(partition: number): void {
    this.thread.post({ type: 'stop', id: this.id, partition });
  }

  commit(offsets: readonly { readonly partition: number; readonly offset: number }[]): Promise<void> {
    return this.thread.call({ type: 'commit', id: this.id, offsets });
  }

  stats(): FeedConsumerStats {
    return this.lastStats;
  }

  async shutdown(): Promise<void> {
    await this.thread.call({ type: 'shutdown', id: this.id });
    this.thread.forget(this.id);
  }
}
