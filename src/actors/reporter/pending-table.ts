// The reporter's events waiting for an acknowledgement, written as its step's effects say (see
// `step.ts`): one table for the actor and for the copies' `report` calls, never copied.
import type { ShardEvent } from '../../core/status.js';
import type { Pending, PendingView } from './step.js';

export class PendingTable implements PendingView {
  readonly pending = new Map<string, Pending>();
  readonly unsent = new Set<string>();

  pend(key: string, event: ShardEvent): void {
    this.pending.set(key, { event, sentIn: undefined });
    this.unsent.add(key);
  }

  sent(keys: readonly string[], seq: number): void {
    for (const key of keys) {
      this.unsent.delete(key);
      this.markSentIn(key, seq);
    }
  }

  acked(keys: readonly string[]): void {
    for (const key of keys) this.pending.delete(key);
  }

  sendAgain(keys: readonly string[]): void {
    for (const key of keys) {
      this.markSentIn(key, undefined);
      this.unsent.add(key);
    }
  }

  private markSentIn(key: string, seq: number | undefined): void {
    const p = this.pending.get(key);
    if (p) this.pending.set(key, { event: p.event, sentIn: seq });
  }
}
