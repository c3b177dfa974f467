// Reassembly of chunked bus messages, as one subscription sees them: pure (no clock, no I/O; the
// caller passes the time), and the same for every Bus adapter. A piece is whatever an adapter
// carries per chunk: the Kafka bus's byte slices, the memory bus's shared frozen value.
import type { IncompleteReason } from './bus.js';
import { MAX_MESSAGE_BYTES, MIN_RECORD_BYTES } from './bus-limits.js';

/** The most chunks a message can have: the largest message in the smallest records. */
const MAX_CHUNKS = Math.ceil(MAX_MESSAGE_BYTES / MIN_RECORD_BYTES);

/** Where a chunk belongs: what its producer wrote beside it. */
export interface ChunkPosition {
  /** Unique per producing bus and message. */
  readonly id: string;
  /** 0 .. count - 1. */
  readonly index: number;
  readonly count: number;
}

/** One chunk record as a subscription read it. */
export interface Chunk<P> {
  readonly position: ChunkPosition;
  readonly offset: number;
  readonly piece: P;
  /** The piece's size, counted against the bytes a subscription may hold. */
  readonly bytes: number;
}

export interface ChunkAssemblyOptions {
  /** A message that gets no new chunk for this long is given up. */
  readonly timeoutMs: number;
  /** When the incomplete messages hold more than this, the oldest are given up until they do not. */
  readonly maxHeldBytes: number;
  /** How long the ids of delivered and given-up messages are remembered (default twice `timeoutMs`). */
  readonly rememberMs?: number;
  /** At most this many of them, the most recent (default 10 000). */
  readonly rememberIds?: number;
}

/** What one chunk did. */
export type ChunkOutcome<P> =
  /** It completed its message: the pieces in index order. */
  | { readonly kind: 'complete'; readonly id: string; readonly pieces: readonly P[]; readonly bytes: number }
  /** Its message waits for more chunks (or was given up at once for memory: see `givenUp`). */
  | { readonly kind: 'waiting' }
  /** A chunk this message already has: ignored. */
  | { readonly kind: 'duplicate' }
  /** A chunk of a message already delivered or given up: ignored. */
  | { readonly kind: 'finished' }
  /** A chunk that contradicts itself or its message's other chunks: ignored. */
  | { readonly kind: 'invalid'; readonly reason: string };

/** A message given up: reported by the caller, never delivered. */
export interface GivenUpMessage {
  readonly id: string;
  /** Distinct chunks that had arrived. */
  readonly seen: number;
  readonly count: number;
  /** The lowest offset of its chunks seen. */
  readonly firstOffset: number;
  readonly reason: IncompleteReason;
}

interface Assembly<P> {
  readonly count: number;
  readonly pieces: (P | undefined)[];
  seen: number;
  bytes: number;
  firstOffset: number;
  /** When it last got a chunk it did not have. */
  lastProgressAt: number;
}

const DEFAULT_REMEMBER_IDS = 10_000;

/**
 * The messages one subscription is assembling. Feed it every chunk record in the order read, with
 * the time; it says when a message is complete, and which ones it gave up (for time, on `add` and
 * `expire`; for memory, on `add`). Time must not go back.
 */
export class ChunkAssembler<P> {
  /** In the order their first chunk arrived: the first is the oldest. */
  private readonly open = new Map<string, Assembly<P>>();
  /** Ids of messages delivered or given up, with when; in that order. */
  private readonly finished = new Map<string, number>();
  private held = 0;
  private readonly rememberMs: number;
  private readonly rememberIds: number;

  constructor(private readonly options: ChunkAssemblyOptions) {
    this.rememberMs = options.rememberMs ?? 2 * options.timeoutMs;
    this.rememberIds = options.rememberIds ?? DEFAULT_REMEMBER_IDS;
  }

  /** Messages being assembled. */
  get assembling(): number {
    return this.open.size;
  }

  /** The bytes their pieces hold. */
  get heldBytes(): number {
    return this.held;
  }

  /**
   * Adds one chunk read at `now`. Messages whose time ran out before it are given up first, so a
   * chunk that arrives after its message's deadline finds it finished.
   */
  add(chunk: Chunk<P>, now: number): { readonly outcome: ChunkOutcome<P>; readonly givenUp: readonly GivenUpMessage[] } {
    const givenUp = this.expire(now);
    const outcome = this.place(chunk, now);
    while (this.held > this.options.maxHeldBytes) {
      const [id, oldest] = this.open.entries().next().value!;
      givenUp.push(this.giveUp(id, oldest, 'memory', now));
    }
    return { outcome, givenUp };
  }

  /** Gives up the messages that got no new chunk for `timeoutMs` up to `now`; forgets old finished ids. */
  expire(now: number): GivenUpMessage[] {
    const givenUp: GivenUpMessage[] = [];
    for (const [id, a] of this.open) {
      if (now - a.lastProgressAt >= this.options.timeoutMs) givenUp.push(this.giveUp(id, a, 'timeout', now));
    }
    for (const [id, at] of this.finished) {
      if (now - at < this.rememberMs && this.finished.size <= this.rememberIds) break;
      this.finished.delete(id);
    }
    return givenUp;
  }

  /** When the next message runs out of time, if one is being assembled. */
  nextDeadline(): number | undefined {
    let next: number | undefined;
    for (const a of this.open.values()) {
      const at = a.lastProgressAt + this.options.timeoutMs;
      if (next === undefined || at < next) next = at;
    }
    return next;
  }

  /**
   * The lowest offset of any chunk of a message being assembled: a commit beyond it would make
   * the group's next subscription start inside that message, which it could never complete.
   */
  commitLimit(): number | undefined {
    let limit: number | undefined;
    for (const a of this.open.values()) if (limit === undefined || a.firstOffset < limit) limit = a.firstOffset;
    return limit;
  }

  private place(chunk: Chunk<P>, now: number): ChunkOutcome<P> {
    const { id, index, count } = chunk.position;
    if (!Number.isSafeInteger(count) || count < 1 || count > MAX_CHUNKS || !Number.isSafeInteger(index) || index < 0 || index >= count) {
      return { kind: 'invalid', reason: `chunk ${index} of ${count} of message ${id} is not a chunk position` };
    }
    if (this.finished.has(id)) return { kind: 'finished' };
    let a = this.open.get(id);
    if (a === undefined) {
      a = { count, pieces: new Array<P | undefined>(count), seen: 0, bytes: 0, firstOffset: chunk.offset, lastProgressAt: now };
      this.open.set(id, a);
    } else if (a.count !== count) {
      return { kind: 'invalid', reason: `chunk ${index} of message ${id} says ${count} chunks, its earlier chunks ${a.count}` };
    }
    if (a.pieces[index] !== undefined) return { kind: 'duplicate' };
    a.pieces[index] = chunk.piece;
    a.seen += 1;
    a.bytes += chunk.bytes;
    this.held += chunk.bytes;
    a.firstOffset = Math.min(a.firstOffset, chunk.offset);
    a.lastProgressAt = now;
    if (a.seen < count) return { kind: 'waiting' };
    this.finish(id, a, now);
    return { kind: 'complete', id, pieces: a.pieces as P[], bytes: a.bytes };
  }

  private giveUp(id: string, a: Assembly<P>, reason: IncompleteReason, now: number): GivenUpMessage {
    this.finish(id, a, now);
    return { id, seen: a.seen, count: a.count, firstOffset: a.firstOffset, reason };
  }

  private finish(id: string, a: Assembly<P>, now: number): void {
    this.open.delete(id);
    this.held -= a.bytes;
    this.finished.set(id, now);
  }
}
