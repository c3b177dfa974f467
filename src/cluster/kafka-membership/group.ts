// What the membership asks of one client library's consumer group: join it with this member's
// metadata, tell what happens to the member (joins, heartbeats, rebalances, crashes), describe the
// group, leave. The membership's rules (views, self-fencing) stay in ../kafka-membership.ts.

/** What the group tells the membership as it goes. */
export interface GroupHooks {
  /**
   * Right before every JoinGroup: the member's metadata user data. Throwing stops the join (a
   * fenced or closed handle never rejoins).
   */
  readonly joining: () => Buffer;
  /** A join completed (its SyncGroup answered) under `memberId`. */
  readonly joined: (memberId: string, isLeader: boolean) => void;
  /** A group request was answered: its API (`Heartbeat`, `SyncGroup`, ...) and how long ago it was sent. */
  readonly responded: (api: string, durationMs: number) => void;
  /** The broker acknowledged a heartbeat. */
  readonly heartbeat: () => void;
  /** The group is rebalancing: the member rejoins. */
  readonly rebalancing: () => void;
  /** The consumer failed; `restart` when the library tries again on its own. */
  readonly crashed: (error: Error, restart: boolean) => void;
}

/** A member of the group as the broker describes it: its id, client id and metadata user data. */
export interface DescribedMember {
  readonly memberId: string;
  readonly clientId: string;
  /** Undefined when the member's metadata is not Kafka's consumer protocol. */
  readonly userData: Buffer | undefined;
}

export interface DescribedGroup {
  readonly state: string;
  readonly members: readonly DescribedMember[];
}

export interface MembershipGroup {
  /** Creates the members topic (one partition) if it is missing; true when this call created it. */
  ensureTopic(replicationFactor: number): Promise<boolean>;
  /** Joins the group; resolves once the first join completed or the consumer gave up. */
  join(hooks: GroupHooks): Promise<void>;
  /** Whether `join` has made the consumer: before that there is nothing to describe. */
  readonly started: boolean;
  /** The group as the broker describes it now. */
  describe(): Promise<DescribedGroup>;
  /** Leaves the group (at once, not after the session) and closes the connections. */
  close(): Promise<void>;
}
