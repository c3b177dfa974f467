// One line per cause and window, not one per copy: a node-wide condition (a store down, a broker
// gone) fails every copy's call at once, and each copy retrying logged each attempt (118 840 lines
// of one retry on one node; 1 000 lines for one failed batched read, issue 34). The first
// occurrence of a cause is logged; the others within the window are counted, and at the window's
// end one line says how many there were. Every occurrence is in a line, none is silent.
import type { Logger } from 'pino';
import type { Clock } from '../cluster/clock.js';

const WINDOW_MS = 10_000;
/** Causes kept per node: past it the oldest is forgotten (its next occurrence is logged again). */
const MAX_CAUSES = 1_000;

const windows = new WeakMap<Logger, Map<string, { suppressed: number }>>();

/**
 * Logs this occurrence of `cause` on `log` (a node's logger) through `line`, unless one of the same
 * cause was logged within the window: then it is counted, and `line(n)` is called once at the
 * window's end with how many were (`n` > 0 marks that summary).
 */
export function limitedLog(log: Logger, clock: Clock, cause: string, line: (suppressed: number) => void, windowMs = WINDOW_MS): void {
  let causes = windows.get(log);
  if (!causes) windows.set(log, (causes = new Map()));
  const open = causes.get(cause);
  if (open) {
    open.suppressed += 1;
    return;
  }
  const window = { suppressed: 0 };
  causes.set(cause, window);
  if (causes.size > MAX_CAUSES) causes.delete(causes.keys().next().value!);
  line(0);
  clock.schedule(windowMs, () => {
    if (causes.get(cause) === window) causes.delete(cause);
    if (window.suppressed > 0) line(window.suppressed);
  });
}
