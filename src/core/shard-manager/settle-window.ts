// The settle window (docs/PLACEMENT.md, "Settle window"): the membership events of one operation
// (several nodes down, a rack lost node by node, a replacement seen as down then up, several adds)
// arrive one by one, and a `balanced` round after each would move copies that the next event moves
// again. So a membership change that leaves every shard with a copy on a present member opens a
// window, each further change moves its end to a window after that change (an operation's events
// come less than a window apart, however many there are), and one round at its end decides
// everything that arrived within it; a stream of changes that never pauses is decided after
// `SETTLE_WINDOW_BOUND` windows all the same. A change that leaves
// a shard with no such copy runs the round at once, everything pending included: availability first.
// Rounds for other reasons (an operator's drain, replace or add, a new dataset, a cooldown's end, an
// ingestion error) run at once too, and so also decide whatever was pending.
import type { DatasetRef } from '../ids.js';
import { noticeTime } from '../iso-time.js';
import { continueMoves } from './planned-moves.js';
import type { Steps } from '../steps.js';
import type { Step } from './step.js';

/** An open window ends at most this many windows after it opened, however often the members change. */
export const SETTLE_WINDOW_BOUND = 10;

/**
 * A shard with no copy on a present member that a round would place (not one an operator stopped,
 * nor one inside its reassignment cooldown): the round cannot wait.
 */
export function shardWithoutPresentCopy(step: Step, ref: DatasetRef): number | undefined {
  if (step.members.length === 0) return undefined;
  const { mapper } = step.dataset(ref)!;
  const held = step.held(ref);
  const members = new Set<string>(step.memberNodes());
  for (let s = 0; s < mapper.numShards; s++) {
    const record = mapper.recordForShard(s);
    if (record.assignments.some((a) => members.has(a.node))) continue;
    if (held.has(s) || (record.assignments.length === 0 && record.status.type === 'Stopped')) continue;
    return s;
  }
  return undefined;
}

/**
 * The end of a step: each `balanced` dataset whose members changed and that had no round since
 * gets its round now if a shard cannot wait (or there is no window), else when its window ends.
 */
export function* settleMembershipRounds(step: Step): Steps<void> {
  for (const ref of [...step.membershipChanged]) {
    step.membershipChanged.delete(ref);
    const ds = step.dataset(ref);
    if (!ds) continue;
    const urgent = shardWithoutPresentCopy(step, ref);
    if (step.settings.settleWindowMs === 0 || urgent !== undefined) {
      yield* step.assignShards(ref);
      continue;
    }
    const window = step.settings.settleWindowMs;
    const opened = ds.roundDueAt === undefined ? step.now : (ds.windowOpenedAt ?? step.now);
    const at = Math.min(step.now + window, opened + SETTLE_WINDOW_BOUND * window);
    if (ds.roundDueAt !== undefined && at <= ds.roundDueAt) continue; // the open window's round decides this too
    step.setRoundDue(ref, at, opened);
    step.schedule(at);
    step.notice({
      name: 'round.deferred',
      level: 'debug',
      dataset: ref,
      message: `${ref}: the members changed and every shard is still served: its round waits for more changes until ${noticeTime(at)} (settleWindowMs ${window})`,
    });
  }
}

/**
 * At a timer: the rounds whose settle window ended. A window not ended yet by `now` is checked
 * again at its end: a timer can fire a millisecond before its time by the clock `now` comes from
 * (Node's timers and `Date.now()` drift apart), and a window left open with no check to come would
 * hold every later membership change's round forever (each one sees the window open).
 */
export function* endSettleWindows(step: Step): Steps<void> {
  for (const ref of step.datasetRefs()) {
    const due = step.dataset(ref)!.roundDueAt;
    if (due === undefined) continue;
    if (due <= step.now) yield* step.assignShards(ref);
    else step.schedule(due);
  }
}

/**
 * A round for a reason that can wait (a handoff finished, moves waiting for the budget): not while
 * the dataset's window is open, whose round will do it with everything else. A `balanced` dataset
 * goes on with the moves its last round planned (`continueMoves`).
 */
export function* roundUnlessSettling(step: Step, ref: DatasetRef): Steps<void> {
  const ds = step.dataset(ref);
  if (ds === undefined || ds.roundDueAt !== undefined) return;
  if (ds.config.strategy === 'balanced') yield* continueMoves(step, ref);
  else yield* step.assignShards(ref);
}
