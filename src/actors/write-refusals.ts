// Writes refused as the design expects: a sink or the MetaStore said a newer owner's token was
// seen, or the node is no longer a member. Around every move and failover a few batches fetched
// before the fence meet one; they are not errors. Each run of refusals of a shard is logged once at
// info, with its count, when it ends (the shard writes again or stops), and every refusal is counted
// in `shardherd_fenced_writes_total`; a run that goes on and on is shown on /status as a problem.
import type { Logger } from 'pino';
import type { Telemetry, FencedWriteKind } from './telemetry.js';
import type { Problems } from './problems.js';

/** Refusals in a row after which the shard's run is shown on /status (the node's map lags, or the sink claims a token nobody issued). */
export const REFUSALS_SHOWN_AFTER = 10;

interface Run {
  count: number;
  readonly cause: string;
  readonly first: Readonly<Record<string, unknown>>;
  shown: boolean;
}

export class WriteRefusals {
  private readonly runs = new Map<FencedWriteKind, Run>();

  constructor(
    private readonly log: Logger,
    private readonly telemetry: Pick<Telemetry, 'fencedWrite'>,
    private readonly problems: Problems,
    /** `dataset/shard`, for the problem's cause. */
    private readonly where: string,
    private readonly dataset: string,
  ) {}

  /** One refused write of `kind` for `cause`; `detail` is logged with the run. */
  refused(kind: FencedWriteKind, cause: string, detail: Readonly<Record<string, unknown>>, message: string): void {
    this.telemetry.fencedWrite(this.dataset, kind, cause);
    let run = this.runs.get(kind);
    if (run === undefined || run.cause !== cause) {
      if (run) this.end(kind);
      run = { count: 0, cause, first: detail, shown: false };
      this.runs.set(kind, run);
    }
    run.count += 1;
    this.log.debug({ event: `${kind}.write-refused`, cause, ...detail }, message);
    if (run.count >= REFUSALS_SHOWN_AFTER && !run.shown) {
      run.shown = true;
      if (this.problems.note(`${kind}.write-refused`, `${this.where} ${cause}`, `${message} (${run.count} times in a row)`)) {
        this.log.warn({ event: `${kind}.write-refused`, cause, refused: run.count, ...detail }, `${message}: still refused after ${run.count} attempts`);
      }
    }
  }

  /** How many writes of `kind` were refused in the current run (0 when none). */
  current(kind: FencedWriteKind): number {
    return this.runs.get(kind)?.count ?? 0;
  }

  /** The run of `kind` ended (a write went through): logged once with its count. */
  end(kind: FencedWriteKind, how = 'written again'): void {
    const run = this.runs.get(kind);
    if (!run) return;
    this.runs.delete(kind);
    this.log.info(
      { event: `${kind}.write-refused`, cause: run.cause, refused: run.count, ended: how, ...run.first },
      `${run.count} ${kind} write(s) refused as fenced (${run.cause}); ${how}`,
    );
  }

  /** The shard stops: every open run is logged. */
  endAll(how: string): void {
    for (const kind of [...this.runs.keys()]) this.end(kind, how);
  }
}
