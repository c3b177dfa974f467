// Where one copy of a shard starts ingesting, and how far it must get before it serves: each copy
// has its own checkpoint, so a copy that restarts or is newly placed never inherits the furthest
// copy's offset and silently skips the records in between.
import type { CopyStartFrom } from '../core/dataset-config.js';
import type { NodeId } from '../core/ids.js';
import type { ShardCheckpoints } from '../store/meta-store.js';

/** Why a copy starts where it does. */
export type CopyStartReason =
  /** Its own checkpoint: the copy restarted (same node id, any incarnation). */
  | 'own-checkpoint'
  /** The shard's checkpoint from before checkpoints were per copy (a store of an older version). */
  | 'shared-checkpoint'
  /** The furthest checkpoint of the shard's other copies (`copyStartFrom: 'serving-copies'`). */
  | 'serving-copies'
  /** The earliest offset the source holds: a new copy (`copyStartFrom: 'earliest'`), or a new shard. */
  | 'earliest'
  /** The source's end: a shard no copy ever checkpointed, of a Kafka dataset with `startFrom: 'latest'`. */
  | 'latest';

export interface CopyStart {
  /** The first offset to read. */
  readonly from: number;
  readonly reason: CopyStartReason;
  /**
   * The offset the copy must reach before it reports `IngestionStarted` (M3DB's bootstrap before
   * Available): the end offset seen at start, which no copy's checkpoint can be beyond.
   */
  readonly catchUpTo: number;
  /** The furthest checkpoint of the other copies, if any (inclusive). */
  readonly peersCheckpoint: number | undefined;
  /** Records between the stored start and the earliest offset the source still holds: lost to retention. */
  readonly lostToRetention: number;
}

export interface CopyStartInput {
  readonly checkpoints: ShardCheckpoints;
  /** The copy's node: its checkpoints are stored under the node id, which survives restarts. */
  readonly node: NodeId;
  readonly group: string;
  readonly copyStartFrom: CopyStartFrom;
  /** What a shard nobody checkpointed does (a Kafka dataset's `startFrom`; `earliest` otherwise). */
  readonly newShardStartFrom: 'earliest' | 'latest';
  readonly earliest: number;
  readonly endAtStart: number;
}

/** The start of one copy; pure, so every rule is tested on hand-built checkpoints. */
export function copyStart(input: CopyStartInput): CopyStart {
  const { checkpoints, node, group, earliest, endAtStart } = input;
  const own = checkpoints.copies.get(node)?.get(group);
  let peersCheckpoint: number | undefined;
  for (const [other, groups] of checkpoints.copies) {
    const offset = other === node ? undefined : groups.get(group);
    if (offset !== undefined && (peersCheckpoint === undefined || offset > peersCheckpoint)) peersCheckpoint = offset;
  }
  const shared = checkpoints.shared.get(group);
  const [stored, reason]: [number, CopyStartReason] =
    own !== undefined ? [own + 1, 'own-checkpoint']
    // Migration: the shard's old checkpoint is where every copy without its own stood.
    : shared !== undefined ? [shared + 1, 'shared-checkpoint']
    : peersCheckpoint !== undefined ? (input.copyStartFrom === 'serving-copies' ? [peersCheckpoint + 1, 'serving-copies'] : [earliest, 'earliest'])
    // Nobody ever ingested this shard: the source's rule, never a silent skip by default (FiloDB's).
    : input.newShardStartFrom === 'latest' ? [endAtStart, 'latest'] : [earliest, 'earliest'];
  const from = Math.max(stored, earliest);
  return { from, reason, catchUpTo: endAtStart, peersCheckpoint, lostToRetention: from - stored };
}
