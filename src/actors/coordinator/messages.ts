// What the node coordinator accepts: its mailbox messages.
import type { DatasetConfig } from '../../core/dataset-config.js';
import type { DatasetRef, Epoch } from '../../core/ids.js';
import type { ShardMapper } from '../../core/shard-mapper.js';
import type { RunningShard, RunningSummary } from '../../core/shard-manager/protocol.js';
import type { Admission, MembersRecord } from '../../protocol/followed-maps.js';
import type { Lot } from '../lot-log.js';

export type CoordinatorMsg =
  /** The node's copy of a dataset's map changed (the mapper is never changed afterwards). */
  | {
      readonly type: 'MapState';
      readonly dataset: DatasetRef;
      readonly epoch: Epoch;
      readonly mapper: ShardMapper;
      readonly config: DatasetConfig;
      readonly shards?: ReadonlySet<number>;
      readonly madeFor?: number;
    }
  /** `admission`: since when the singleton counts this incarnation (absent: it does not). */
  | { readonly type: 'Members'; readonly members: MembersRecord; readonly admission?: Admission }
  | { readonly type: 'DatasetGone'; readonly dataset: DatasetRef }
  | { readonly type: 'StopAll'; readonly reason: string }
  | { readonly type: 'GetRunning'; readonly reply: (running: RunningShard[]) => void }
  /** Counts of every copy and the first `listUpTo` as `GetRunning` gives them: /status of a node of 65 536 copies built them all. */
  | { readonly type: 'GetRunningSummary'; readonly listUpTo: number; readonly reply: (summary: RunningSummary) => void }
  /** The rest of a reconciliation too large for one turn of the event loop (`RECONCILE_SLICE`). */
  | {
      readonly type: 'ReconcileRest';
      readonly dataset: DatasetRef;
      readonly wanted: readonly number[];
      readonly from: number;
      readonly started: Lot;
      readonly stopsBefore: number;
    };

/**
 * Copies to run that one reconciliation looks at in one message: a map that gives a node 65 536
 * copies starts them over 64 turns of the event loop instead of one of about a second. Each slice
 * looks at its own shards against the map current then (a newer map may have come in between);
 * it used to filter the whole rest again, which made a large map's start quadratic.
 */
export const RECONCILE_SLICE = 1024;
