// Where one copy of a shard starts ingesting, and how far it must get before it serves. Where each
// copy keeps its own data (the default), each copy has its own checkpoint, so a copy that restarts
// or is newly placed never inherits the furthest copy's offset and silently skips the records in
// between. Where every copy writes one shared store (the sink declares `storage: 'shared'`), the
// shard's newest fenced checkpoint, of whichever copy, vouches for what that store holds: a copy
// that comes back to a node resumes there instead of replaying from its own older one
// (docs/ARCHITECTURE.md §12.3).
import type { CopyStartFrom } from '../core/dataset-config.js';
import { compareTokens, type FencingToken } from '../core/fencing-token.js';
import type { NodeId } from '../core/ids.js';
import type { SinkStorage } from './ingestion-source.js';
import type { ShardCheckpoints } from '../store/meta-store.js';

/** Why a copy starts where it does. */
export type CopyStartReason =
  /** Its own checkpoint: the copy restarted (same node id, any incarnation). */
  | 'own-checkpoint'
  /** The shard's checkpoint from before checkpoints were per copy (a store of an older version). */
  | 'shared-checkpoint'
  /**
   * The shard's newest fenced checkpoint, of another copy, beyond where the copy would otherwise
   * start: the sink writes one store for all copies (`storage: 'shared'`).
   */
  | 'newest-fenced-checkpoint'
  /** The furthest checkpoint of the shard's other copies (`copyStartFrom: 'serving-copies'`). */
  | 'serving-copies'
  /** The earliest offset the source holds: a new copy (`copyStartFrom: 'earliest'`), or a new shard. */
  | 'earliest'
  /** The source's end: a shard no copy ever checkpointed, of a Kafka dataset with `startFrom: 'latest'`. */
  | 'latest';

/** A copy's checkpoint with the token it was written under. */
export interface FencedCheckpoint {
  readonly node: NodeId;
  readonly offset: number;
  readonly token: FencingToken;
}

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
  /** What the sink declares (`RecordSink.storage`); `per-copy` when left out. */
  readonly storage?: SinkStorage;
}

/**
 * The shard's newest fenced checkpoint in `group`, over every node's copy: the greatest
 * `(token, offset)`, lexicographically (the order in which the MetaStore admits checkpoints).
 * Checkpoints written before tokens existed are not fenced and not considered.
 */
export function newestFencedCheckpoint(checkpoints: ShardCheckpoints, group: string): FencedCheckpoint | undefined {
  let newest: FencedCheckpoint | undefined;
  for (const [node, groups] of checkpoints.copies) {
    const offset = groups.get(group);
    const token = checkpoints.tokens?.get(node)?.get(group);
    if (offset === undefined || token === undefined) continue;
    const c = newest === undefined ? 1 : compareTokens(token, newest.token);
    if (c > 0 || (c === 0 && offset > newest!.offset)) newest = { node, offset, token };
  }
  return newest;
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
  const [perCopy, perCopyReason]: [number, CopyStartReason] =
    own !== undefined
      ? [own + 1, 'own-checkpoint']
      : // Migration: the shard's old checkpoint is where every copy without its own stood.
        shared !== undefined
        ? [shared + 1, 'shared-checkpoint']
        : peersCheckpoint !== undefined
          ? input.copyStartFrom === 'serving-copies'
            ? [peersCheckpoint + 1, 'serving-copies']
            : [earliest, 'earliest']
          : // Nobody ever ingested this shard: the source's rule, never a silent skip by default (FiloDB's).
            input.newShardStartFrom === 'latest'
            ? [endAtStart, 'latest']
            : [earliest, 'earliest'];
  // One store for all copies: what the copy would replay below the shard's newest fenced checkpoint
  // is already in it (the checkpoint is written only once the sink accepted up to it), whether the
  // copy has an older checkpoint of its own or none (then `copyStartFrom` is about data the copy
  // would keep itself, which it does not). Never lower than the per-copy start: that one is safe too.
  const newest = input.storage === 'shared' ? newestFencedCheckpoint(checkpoints, group) : undefined;
  const [stored, reason]: [number, CopyStartReason] =
    newest !== undefined && newest.offset + 1 > perCopy ? [newest.offset + 1, 'newest-fenced-checkpoint'] : [perCopy, perCopyReason];
  const from = Math.max(stored, earliest);
  // Whatever the start, the copy serves only once it reached the end seen at start: with a shared
  // store the node still has to hold the shard's recent records before it answers for it.
  return { from, reason, catchUpTo: endAtStart, peersCheckpoint, lostToRetention: from - stored };
}
