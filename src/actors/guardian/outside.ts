// What reads the guardian's state outside its mailbox: the records of the events topic it handles
// unread, and its maps, members and epochs for the node's reads.
import type { RecordLabels } from '../../cluster/bus.js';
import type { DatasetConfig } from '../../core/dataset-config.js';
import type { DatasetRef, Epoch } from '../../core/ids.js';
import type { ShardMapFollower } from '../../core/map-follower.js';
import type { RunningSummary } from '../../core/shard-manager/protocol.js';
import type { FollowedMaps, MembersRecord } from '../../protocol/followed-maps.js';
import { snapshotEnvelope } from '../../protocol/wire-events.js';
import { hostPrefix } from '../../protocol/wire.js';
import type { NodeEnv } from '../node-env.js';

/** What a guardian holds: its maps (for the node's reads and the next singleton) and the members. */
export interface GuardianCache {
  readonly maxEpoch: number;
  readonly maps: ReadonlyMap<DatasetRef, ShardMapFollower>;
  readonly configs: ReadonlyMap<DatasetRef, DatasetConfig>;
  readonly members: MembersRecord | undefined;
  readonly singletonEpoch: Epoch | undefined;
}

/** The guardian's state as the outlook reads it. */
export interface OutlookState {
  readonly maxEpoch: number;
  readonly maps: FollowedMaps;
  readonly singletonEpoch?: Epoch | undefined;
}

/**
 * Which records of the events topic a node handles from their labels alone, unread
 * (`SubscribeOptions.skip`): a whole map it has already (another node's sync answer), handled
 * against the guardian's state (`FollowedMaps.snapshotFromEnvelope`). Only while no record read
 * before it waits in the guardian's mailbox: the state it is handled in is then the state it would
 * have been read in, and the count of records handed on and not yet taken keeps that true.
 */
export class EventsSkip {
  /** Records of the events topic handed to the guardian and not handled to their end yet. */
  private waiting = 0;

  constructor(
    private readonly env: Pick<NodeEnv, 'node' | 'incarnation' | 'clock' | 'singletonContact'>,
    private readonly outlook: GuardianOutlook,
  ) {}

  /** A record goes to the guardian's mailbox. */
  handedOn(): void {
    this.waiting++;
  }

  /** The guardian is done with a record (handling one may wait on the bus or the coordinator). */
  taken(): void {
    this.waiting = Math.max(0, this.waiting - 1);
  }

  readonly skips = (labels: RecordLabels): boolean => {
    const s = this.outlook.state();
    const m = snapshotEnvelope(labels);
    if (!s || !m || this.waiting > 0) return false;
    if (m.epoch < s.maxEpoch) return true; // a replaced singleton's: the guardian ignores it (I6)
    if (m.epoch > s.maxEpoch || m.toHosts.includes(hostPrefix(this.env.node, this.env.incarnation))) return false;
    if (!s.maps.snapshotFromEnvelope(m)) return false;
    // Unread, it still says the singleton is there, as reading it would have.
    this.env.singletonContact?.heard(this.env.clock.now());
    return true;
  };
}

/**
 * The guardian's state as it is between two of its steps, read outside its mailbox by what must
 * not wait behind a map being applied there (about 470 ms per guardian for a new 65 536-shard map
 * on the embedded demo): whole maps skipped unread (`EventsSkip`), replies (`RequestLane`), and the
 * maps the node's HTTP routes and query-router checks read. A map is applied in slices but
 * installed at once, so a read between slices sees the map before it, whole.
 */
export class GuardianOutlook {
  private current: (() => OutlookState) | undefined;

  /** The guardian's state, once it has one. */
  attach(state: () => OutlookState): void {
    this.current = state;
  }

  /** @internal */
  state(): OutlookState | undefined {
    return this.current?.();
  }

  /** The newest singleton epoch the guardian has seen (-1 before it has a state). */
  newestEpoch(): number {
    return this.state()?.maxEpoch ?? -1;
  }

  /** The maps, configs and members the guardian follows now; undefined before it has a state. */
  cache(): GuardianCache | undefined {
    const s = this.state();
    return s && { maxEpoch: s.maxEpoch, maps: s.maps.followers, configs: s.maps.configs, members: s.maps.members, singletonEpoch: s.singletonEpoch };
  }
}

/** What a node that runs nothing (or whose coordinator has stopped) says it runs. */
export const NOTHING_RUNNING: RunningSummary = { listed: [], counts: {} };

/** What reads the guardian's state outside its mailbox; `skip` is told when it is done with each events record. */
export interface GuardianOutside {
  readonly outlook: GuardianOutlook;
  readonly skip: EventsSkip;
}
