// What went wrong on a node that no retry fixes and that an operator must see: kept per kind and
// cause with a count, shown on the node's /status and its page, so a failure is logged once, not
// once per attempt, and still never silent.

import type { OperatorProblem } from '../core/shard-manager/protocol.js';

export type Problem = OperatorProblem;

/** The most distinct problems kept: the oldest go first. */
const MAX_PROBLEMS = 50;

export class Problems {
  private readonly byKey = new Map<string, { -readonly [K in keyof Problem]: Problem[K] }>();

  constructor(private readonly now: () => number) {}

  /** Records one occurrence; true the first time this event and cause are seen (log it then). */
  note(event: string, cause: string, message: string): boolean {
    const key = `${event} ${cause}`;
    const at = this.now();
    const p = this.byKey.get(key);
    if (p) {
      p.count += 1;
      p.lastAt = at;
      p.message = message;
      return false;
    }
    this.byKey.set(key, { event, cause, message, count: 1, firstAt: at, lastAt: at });
    if (this.byKey.size > MAX_PROBLEMS) this.byKey.delete(this.byKey.keys().next().value!);
    return true;
  }

  /** Every problem kept, the most recent first. */
  list(): Problem[] {
    return [...this.byKey.values()].map((p) => ({ ...p })).sort((a, b) => b.lastAt - a.lastAt);
  }
}
