// Whether the singleton a node hosts still acts (docs/ARCHITECTURE.md §11.9). Its stop must not
// wait for the singleton's actor: that actor may be blocked for as long as a MetaStore call hangs
// (a blackholed Cassandra path), and a stop sent to it as a message is read only after that call
// returns. So the stop is this flag, set at once on the path that decides it (the lease keeper's
// timer, the guardian), and read synchronously by everything that acts in the singleton's name:
// each effect before it is carried out (no map change, no publish, no reply after it), the
// grants (through the lease keeper), and the node's /status and metrics, which would otherwise show
// the last state the blocked actor gave them.

import type { ShardManagerState } from '../core/shard-manager/step.js';

export class SingletonRole {
  private current: { readonly epoch: number; stoppedBecause: string | undefined; readonly stopNow: ((reason: string) => void) | undefined } | undefined;
  /** The last state the singleton made readable (stored), with its epoch. */
  private shown: { readonly epoch: number; readonly state: ShardManagerState } | undefined;

  /**
   * The singleton of `epoch` stored what it decided: the node's /status shows this state without
   * asking the singleton's actor, whose mailbox waits behind a decision in slices (seconds at
   * 65 536 shards) while its reads are answered already.
   */
  show(epoch: number, state: ShardManagerState): void {
    this.shown = { epoch, state };
  }

  /** The state the acting singleton last stored, if one acts here and has recovered. */
  shownState(): ShardManagerState | undefined {
    const acting = this.actingEpoch;
    return acting !== undefined && this.shown?.epoch === acting ? this.shown.state : undefined;
  }

  /**
   * The singleton of `epoch` starts acting here; `stopNow` stops everything it does at once (its
   * grants, judging, timers), for `stepDown`.
   */
  begin(epoch: number, stopNow?: (reason: string) => void): void {
    this.current = { epoch, stoppedBecause: undefined, stopNow };
  }

  /**
   * Stops the singleton acting here, if one does, at once (a graceful stop of its node hands the
   * role over); returns its epoch, or undefined when none acted.
   */
  stepDown(reason: string): number | undefined {
    const c = this.current;
    if (!c || c.stoppedBecause !== undefined) return undefined;
    if (c.stopNow) c.stopNow(reason);
    else c.stoppedBecause = reason;
    return c.epoch;
  }

  /** The singleton of `epoch` must not act any more; returns false if it had stopped already (or another epoch acts). */
  stop(epoch: number, reason: string): boolean {
    const c = this.current;
    if (c?.epoch !== epoch || c.stoppedBecause !== undefined) return false;
    c.stoppedBecause = reason;
    return true;
  }

  /** Whether the singleton of `epoch` may still act. */
  acting(epoch: number): boolean {
    return this.current?.epoch === epoch && this.current.stoppedBecause === undefined;
  }

  /** The epoch of the singleton acting here now, if any. */
  get actingEpoch(): number | undefined {
    return this.current?.stoppedBecause === undefined ? this.current?.epoch : undefined;
  }

  /** Why the singleton of `epoch` stopped, if it did. */
  stoppedBecause(epoch: number): string | undefined {
    return this.current?.epoch === epoch ? this.current.stoppedBecause : undefined;
  }
}
