// Which format the singleton writes maps and their changes in: the packed one (format 4) only for
// readers that said they read it. A subscriber says so when it asks for maps (`mapFormat` in
// `SyncMaps` and `Subscribe`), a node in its answer to a new singleton's recovery question
// (`cluster-state`); an older one says nothing and gets the compact format (3) it reads. A whole map
// addressed to subscribers is packed when each of their processes said 4; one addressed to nobody
// in particular (a new dataset's, which every node reads) when each member's process did. A node
// that lacks a map reads one addressed to another node too; one of an older version cannot read a
// packed one, skips it as malformed, and reads its own, in format 3, which it asked for: slower,
// never wrong. Changes are applied by every node: packed only when every member and addressee said 4.
import {
  COMPACT_MAP_FORMAT,
  encodeEvents,
  encodeSnapshot,
  PACKED_MAP_FORMAT,
  snapshotPacking,
  type CompactSnapshot,
  type EncodedEvents,
  type PackedSnapshot,
} from '../core/map-codec.js';
import { packEvents, type PackedEvents } from '../core/packed-events.js';
import type { ShardEvent } from '../core/status.js';
import type { Steps } from '../core/steps.js';
import type { ShardMapSnapshot } from '../core/shard-map-snapshot.js';
import type { Member } from '../core/shard-manager/protocol.js';
import type { Incarnation, NodeId, SubscriberId } from '../core/ids.js';

/** Processes remembered at most (members and clients): the oldest is forgotten first. */
const MAX_READERS = 10_000;

/** The process of a subscriber id: `node@incarnation` of `node@incarnation/guardian`, `client:id` of `client:id/maps`. */
const processOf = (subscriber: string): string | undefined => /^[^/]+(?=\/)/.exec(subscriber)?.[0];
const processOfNode = (node: string, incarnation: string): string => `${node}@${incarnation}`;
const processOfMember = (m: Member): string => processOfNode(m.node, m.incarnation);

export class MapReaders {
  /** Each process's newest format, by `node@incarnation`, oldest heard first. */
  private readonly newest = new Map<string, number>();

  /** A subscriber said which format it reads (`mapFormat`, absent from older versions). */
  heard(subscriber: SubscriberId, mapFormat: number | undefined): void {
    const process = processOf(subscriber);
    if (process !== undefined) this.remember(process, mapFormat);
  }

  /** A node said it in its answer to a new singleton's question (`cluster-state`). */
  heardFromNode(node: NodeId, incarnation: Incarnation, mapFormat: number | undefined): void {
    this.remember(processOfNode(node, incarnation), mapFormat);
  }

  private remember(process: string, mapFormat: number | undefined): void {
    if (mapFormat === undefined) return;
    this.newest.delete(process);
    this.newest.set(process, mapFormat);
    if (this.newest.size > MAX_READERS) this.newest.delete(this.newest.keys().next().value!);
  }

  /** The format of a whole map for the subscribers `to`, or, when it is addressed to none, for every member. */
  formatFor(to: readonly SubscriberId[], members: readonly Member[]): typeof COMPACT_MAP_FORMAT | typeof PACKED_MAP_FORMAT {
    return this.allRead(to.length > 0 ? to.map(processOf) : members.map(processOfMember));
  }

  /**
   * The format of a map's changes: every node applies them, so every member must read it, and so
   * must the subscribers `to`. A node that cannot read one sees a gap and asks for the whole map.
   */
  changesFormatFor(to: readonly SubscriberId[], members: readonly Member[]): typeof COMPACT_MAP_FORMAT | typeof PACKED_MAP_FORMAT {
    return this.allRead([...to.map(processOf), ...members.map(processOfMember)]);
  }

  /** The changes of a map for the subscribers `to` and every member, in the format `changesFormatFor` gives. */
  encodeChanges(events: readonly ShardEvent[], to: readonly SubscriberId[], members: readonly Member[]): EncodedEvents | PackedEvents {
    return this.changesFormatFor(to, members) === PACKED_MAP_FORMAT ? packEvents(events) : encodeEvents(events);
  }

  private allRead(processes: readonly (string | undefined)[]): typeof COMPACT_MAP_FORMAT | typeof PACKED_MAP_FORMAT {
    const packed = processes.every((process) => process !== undefined && (this.newest.get(process) ?? COMPACT_MAP_FORMAT) >= PACKED_MAP_FORMAT);
    return packed ? PACKED_MAP_FORMAT : COMPACT_MAP_FORMAT;
  }

  /** A whole map for the subscribers `to` (or every member), encoded in the format `formatFor` gives; packing runs in steps. */
  *encoding(snapshot: ShardMapSnapshot, to: readonly SubscriberId[], members: readonly Member[]): Steps<CompactSnapshot | PackedSnapshot> {
    if (this.formatFor(to, members) === PACKED_MAP_FORMAT) return yield* snapshotPacking(snapshot);
    return encodeSnapshot(snapshot);
  }
}
