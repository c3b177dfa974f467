// I16, from the bus itself: a copy says it is Active once per assignment. Each `IngestionStarted` a
// node incarnation sends for a copy again must have a reason the checker sees for itself: the last
// one was not acknowledged, or not long enough before for its node to have heard it (a resend, at
// least `resendMs` later), the shard's assignment changed in a persisted map since, or shortly
// before, so that its node may not have heard of it yet (a new epoch or version: a restate), or
// the copy said something else meanwhile (a new run). A report storm (a node restating every copy at every map or members
// message while the singleton lags) breaks it at once.

export interface ReportEvent {
  readonly type: string;
  readonly dataset: string;
  readonly shard: number;
}

/** How late a node may hear a record (an acknowledgement, a map) in the simulated world: its pauses and stalls, 5 s at most, and a delayed record. */
const HEARD_WITHIN_MS = 6_000;

interface LastStarted {
  readonly at: number;
  readonly seq: number;
}

export class ReportChecker {
  /** `incarnation dataset/shard` → the last IngestionStarted sent. */
  private readonly started = new Map<string, LastStarted>();
  /** `incarnation dataset/shard` → when the copy last said something other than IngestionStarted. */
  private readonly otherAt = new Map<string, number>();
  /** `node@incarnation#seq` → when its acknowledgement was on the bus. */
  private readonly acked = new Map<string, number>();
  /** `dataset/shard` → when a persisted map last changed its token (epoch or assignment version). */
  private readonly tokenAt = new Map<string, number>();
  private readonly tokens = new Map<string, string>();
  /** Repeated IngestionStarted each explained, by reason (for the run's statistics and tests). */
  readonly explained = { resends: 0, restates: 0, newRuns: 0 };
  /** IngestionStarted events seen. */
  startedSeen = 0;

  constructor(
    private readonly resendMs: number,
    private readonly violate: (message: string) => void,
  ) {}

  /** A persisted map: the token of each of its shards. */
  map(at: number, dataset: string, epoch: number, versions: readonly number[]): void {
    versions.forEach((version, shard) => {
      const key = `${dataset}/${shard}`;
      const token = `${epoch}/${version}`;
      if (this.tokens.get(key) === token) return;
      this.tokens.set(key, token);
      this.tokenAt.set(key, at);
    });
  }

  /**
   * An acknowledgement on the bus, `at` when it is there (after any delay). Only one of the newest
   * singleton counts: a node ignores a replaced singleton's records, and sends the report again.
   */
  ack(at: number, epoch: number, node: string, incarnation: string, seq: number): void {
    if (epoch < this.newestEpoch) return;
    const key = `${node}@${incarnation}#${seq}`;
    this.acked.set(key, Math.min(at, this.acked.get(key) ?? Infinity));
  }

  /** A record of a singleton on the bus (events or replies): the newest epoch so far. */
  singletonRecord(epoch: number): void {
    this.newestEpoch = Math.max(this.newestEpoch, epoch);
  }

  private newestEpoch = 0;

  /** A report a node sent at `at`. */
  report(at: number, node: string, incarnation: string, seq: number, events: readonly ReportEvent[]): void {
    for (const e of events) {
      const copy = `${node}@${incarnation} ${e.dataset}/${e.shard}`;
      if (e.type !== 'IngestionStarted') {
        this.otherAt.set(copy, at);
        continue;
      }
      this.startedSeen++;
      const last = this.started.get(copy);
      this.started.set(copy, { at, seq });
      if (!last) continue;
      const ackedAt = this.acked.get(`${node}@${incarnation}#${last.seq}`);
      // A node hears an acknowledgement some time after it is on the bus (a pause or a stall of up
      // to 5 s here), and its resend timer may fire first: a resend is one at least `resendMs` after
      // the last send that its node may not have heard acknowledged yet.
      if ((ackedAt === undefined || at - ackedAt < HEARD_WITHIN_MS) && at - last.at >= this.resendMs - 1) this.explained.resends++;
      // A node hears of a new assignment some time after the singleton persisted it, and may have
      // said its status under the old one meanwhile: a restate follows a change it may not have heard.
      else if ((this.tokenAt.get(`${e.dataset}/${e.shard}`) ?? -Infinity) >= last.at - HEARD_WITHIN_MS) this.explained.restates++;
      else if ((this.otherAt.get(copy) ?? -Infinity) >= last.at) this.explained.newRuns++;
      else {
        this.violate(
          `${node}@${incarnation} said ${e.dataset}/${e.shard} is Active again at ${at} ms (report ${seq}) with no reason: its last one (report ${last.seq}, at ${last.at} ms) was ${ackedAt === undefined ? 'not acknowledged, but only ' + String(at - last.at) + ' ms before' : 'acknowledged'}, and neither the shard's assignment nor the copy's status changed since`,
        );
      }
    }
  }
}
