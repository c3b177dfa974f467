// What the main thread and the fetch thread (./fetch-thread.ts) say to each other. Each dataset's
// consumer has an id; runs travel as their parts, their buffers transferred rather than copied.
import type { KafkaConnection } from '../../cluster/kafka-client.js';
import type { Room } from './batch-estimate.js';
import type { FeedConsumerStats } from './feed-client.js';
import type { FetchedRunParts } from './fetched-run.js';
import type { PackedBatch } from './run-consumer.js';
import type { KafkaSourceSettings } from './settings.js';

/** What the fetch thread starts with: everything but functions (a logger, a decoder) crosses. */
export interface FetchThreadInit {
  /** The connection without its logger: the thread logs through its own, relayed to the source's. */
  readonly connection: Omit<KafkaConnection, 'log'>;
  readonly settings: Omit<KafkaSourceSettings, 'decode'>;
  /** The source's log level: lines below it are not sent over. */
  readonly logLevel: string;
}

type Offsets = readonly { readonly partition: number; readonly offset: number }[];

export type ToFetchThread =
  | { readonly type: 'open'; readonly id: number; readonly dataset: string; readonly topic: string }
  | { readonly type: 'schedule'; readonly id: number; readonly delayMs: number; readonly wanted: readonly number[] }
  | { readonly type: 'start'; readonly id: number; readonly partition: number; readonly offset: number; readonly epoch: number; readonly room: Room }
  | { readonly type: 'grant'; readonly id: number; readonly partition: number; readonly epoch: number; readonly room: Room }
  | { readonly type: 'stop'; readonly id: number; readonly partition: number }
  | { readonly type: 'commit'; readonly id: number; readonly call: number; readonly offsets: Offsets }
  | { readonly type: 'shutdown'; readonly id: number; readonly call: number }
  | { readonly type: 'close'; readonly call: number };

/** A packed batch with its run as parts. */
export type BatchMessage = Omit<PackedBatch, 'run'> & { readonly run: FetchedRunParts | undefined };

/** An error as it crosses: its message and what shardherd's code looks at (kafkajs's `type` and `retriable`). */
export interface ErrorMessage {
  readonly name: string;
  readonly message: string;
  readonly stack?: string | undefined;
  readonly type?: string | undefined;
  readonly retriable?: boolean | undefined;
}

export type FromFetchThread =
  | { readonly type: 'join'; readonly id: number; readonly assigned: readonly number[] }
  | { readonly type: 'batch'; readonly id: number; readonly batch: BatchMessage }
  | { readonly type: 'stats'; readonly id: number; readonly stats: FeedConsumerStats }
  | { readonly type: 'fail'; readonly id: number; readonly error: ErrorMessage }
  | { readonly type: 'done'; readonly call: number }
  /** One line of the thread's log, as pino wrote it. */
  | { readonly type: 'log'; readonly line: string };

export function errorMessageOf(e: unknown): ErrorMessage {
  if (!(e instanceof Error)) return { name: 'Error', message: String(e) };
  const { type, retriable } = e as { type?: unknown; retriable?: unknown };
  return {
    name: e.name,
    message: e.message,
    stack: e.stack,
    type: typeof type === 'string' ? type : undefined,
    retriable: typeof retriable === 'boolean' ? retriable : undefined,
  };
}

export function errorOf(m: ErrorMessage): Error {
  const e = Object.assign(new Error(m.message), m.type === undefined ? {} : { type: m.type }, m.retriable === undefined ? {} : { retriable: m.retriable });
  e.name = m.name;
  if (m.stack !== undefined) e.stack = m.stack;
  return e;
}
