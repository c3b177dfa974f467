// One line per kind of lot and window: the copies a change of the map started or stopped on a
// node. A node that gets 16 384 copies back after a fence gets them in planned moves, 16 at a
// time, one map change each: a line per change was 1024 lines. The first lot of a kind is said at
// once; the lots of the same kind within the window (`limitedLog`'s) are summed into one line at
// its end, with how many changes they came in. Every copy is in a line, none is silent.
import type { Logger } from 'pino';
import type { Clock } from '../cluster/clock.js';
import { limitedLog } from './log-limiter.js';

/** A lot of copies, and the first few of them (`dataset/shard`) to name in its line. */
export interface Lot {
  readonly count: number;
  readonly sample: readonly string[];
}

export class LotLog {
  /** Lots held back within the window, per kind, summed. */
  private readonly held = new Map<string, { count: number; sample: string[]; changes: number }>();

  constructor(
    private readonly log: Logger,
    private readonly clock: Clock,
  ) {}

  /** Says `lot` of `kind` through `line` now, or sums it into the kind's line at the window's end. */
  say(kind: string, lot: Lot, line: (lot: Lot, changes: number) => void): void {
    let said = false;
    limitedLog(this.log, this.clock, kind, (more) => {
      if (more === 0) {
        said = true;
        line(lot, 1);
        return;
      }
      const held = this.held.get(kind);
      this.held.delete(kind);
      if (held) line(held, held.changes);
    });
    if (said) return;
    const held = this.held.get(kind) ?? { count: 0, sample: [], changes: 0 };
    held.count += lot.count;
    held.sample = [...held.sample, ...lot.sample].slice(0, 5);
    held.changes += 1;
    this.held.set(kind, held);
  }
}
