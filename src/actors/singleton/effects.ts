// What the singleton's step asks its shell to do, as plain data, in the order given.
import type { BusRecord } from '../../cluster/bus.js';
import type { Incarnation, NodeId, SubscriberId } from '../../core/ids.js';
import type { ShardManagerInput } from '../../core/shard-manager/protocol.js';
import type { EventsMessage, InboxMessage, RepliesMessage } from '../../protocol/wire.js';
import type { Frame, SetupRequest, TimerMsg } from './state.js';

/** A record for the bus, handed over without waiting (see `sendLater`), once the singleton still acts (`act` names what it does). */
export type Produce = { readonly type: 'Produce'; readonly act: string; readonly what: string } & (
  | { readonly topic: 'inbox'; readonly message: InboxMessage }
  | { readonly topic: 'events'; readonly message: EventsMessage }
  | { readonly topic: 'replies'; readonly message: RepliesMessage }
);

export type SingletonEffect =
  | { readonly type: 'Log'; readonly level: 'debug' | 'info' | 'warn' | 'error'; readonly fields: Readonly<Record<string, unknown>>; readonly message: string }
  | { readonly type: 'Schedule'; readonly afterMs: number; readonly msg: TimerMsg }
  /** A message to the singleton itself, behind those in its mailbox. */
  | { readonly type: 'Send'; readonly msg: TimerMsg }
  /** Reads what recovery starts from (six reads, in order); answered by `StoreRead`. */
  | { readonly type: 'ReadStore' }
  /** Answered by `InboxStartRead`. */
  | { readonly type: 'ReadInboxStart' }
  | { readonly type: 'Subscribe'; readonly startAt: number | undefined }
  /** This group holds the position from now on (awaited). */
  | { readonly type: 'CommitInboxStart'; readonly startAt: number }
  /** Commits the inbox up to `lastOffset`, without waiting (see `commit`). */
  | { readonly type: 'CommitInbox'; readonly lastOffset: number }
  | Produce
  /** Asks the source whether a new dataset matches it; answered by `Validated`. */
  | { readonly type: 'Validate'; readonly request: SetupRequest; readonly then: readonly Frame[] }
  /** Decides on the core's state and performs the decision's effects; answered by `Decided`. */
  | { readonly type: 'Decide'; readonly input: ShardManagerInput; readonly then: readonly Frame[] }
  /** Answered by `LeaseRead`. */
  | { readonly type: 'ReadLease' }
  | { readonly type: 'HeardMapFormat'; readonly subscriber: SubscriberId; readonly mapFormat: number | undefined }
  | { readonly type: 'HeardNodeMapFormat'; readonly node: NodeId; readonly incarnation: Incarnation; readonly mapFormat: number | undefined }
  | { readonly type: 'Malformed'; readonly record: BusRecord; readonly reason: string }
  /** A report dropped for want of room (`queued` wait already): logged at most once per 10 s, the others counted. */
  | { readonly type: 'ReportsDropped'; readonly queued: number }
  | { readonly type: 'CountEviction' }
  | { readonly type: 'Recovered'; readonly recoveryMs: number }
  /** The records of an `Inbox` message are handled: the shell sends another if more wait. */
  | { readonly type: 'InboxDone' }
  /** Stops the singleton; answered by `Stopped`. */
  | { readonly type: 'StopSelf'; readonly reason: string };
