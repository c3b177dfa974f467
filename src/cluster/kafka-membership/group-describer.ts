// After each join, the membership group as the broker describes it once it is Stable: one describe
// at a time, looking again while the group is still rebalancing.
import type { Logger } from 'pino';
import type { DescribedGroup } from './group.js';

/** How many times a view refresh describes a group that is not Stable before it waits for the next join. */
const MAX_DESCRIBE_ATTEMPTS = 20;

export interface GroupDescriberParams {
  /** Describes the group, once there is a consumer to ask (undefined before). */
  readonly describe: () => Promise<DescribedGroup> | undefined;
  /** False once the handle is fenced or closed: it describes nothing more. */
  readonly active: () => boolean;
  /** Gets each Stable description that no newer request made stale. */
  readonly onStable: (group: DescribedGroup) => void;
  /** How long to wait before looking again at a group that is not Stable. */
  readonly retryMs: number;
  /** Asked at each use: the handle's logger gains the node's fields when it joins. */
  readonly log: () => Logger;
}

export class GroupDescriber {
  private wanted = false;
  private running = false;

  constructor(private readonly p: GroupDescriberParams) {}

  /** Asks for a fresh description (after a join); one that is under way is then stale. */
  request(): void {
    this.wanted = true;
    if (!this.running) void this.loop();
  }

  /**
   * Describes the group until it is Stable and hands the description on. One describe at a time;
   * a join that completes meanwhile makes the result stale, so it is described again.
   */
  private async loop(): Promise<void> {
    this.running = true;
    let attempts = 0;
    try {
      while (this.wanted && this.p.active()) {
        this.wanted = false;
        const described = this.p.describe();
        if (!described) return;
        let group: DescribedGroup | undefined;
        try {
          group = await described;
        } catch (e) {
          this.p.log().debug({ err: e }, 'describing the membership group failed');
        }
        if (!this.p.active()) return;
        if (this.wanted) continue;
        if (group?.state === 'Stable') {
          attempts = 0;
          this.p.onStable(group);
          continue;
        }
        // Rebalancing again (or unreachable): the next join brings a new refresh; until then, look again.
        attempts += 1;
        if (attempts >= MAX_DESCRIBE_ATTEMPTS) {
          this.p.log().warn({ state: group?.state }, `the membership group was not Stable after ${attempts} looks; waiting for the next rebalance`);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, this.p.retryMs));
        this.wanted = true;
      }
    } finally {
      this.running = false;
    }
  }
}
