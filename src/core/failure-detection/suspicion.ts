// The arithmetic of suspicion (docs/ARCHITECTURE.md §11.5): how many votes an eviction needs, and
// how long a silence must last given how many helpers confirmed it.

/**
 * The votes an eviction needs among the `n − 1` observers of a node in a cluster of `n` monitored
 * members (the node and the singleton included): a strict majority, so a node that most of the
 * cluster still reaches is never evicted, and a singleton cut off from most of it evicts nobody.
 */
export function quorum(n: number): number {
  if (!Number.isInteger(n) || n < 2) throw new RangeError(`a quorum needs at least two members, got ${n}`);
  return Math.floor((n - 1) / 2) + 1;
}

/**
 * The fraction of the suspicion timeout a silence must last when every helper confirmed it: the
 * longest pause a node survives is this much of the timeout less a heartbeat and the network's jitter
 * (1.25 s with the defaults, for the 1 s pauses a node must survive).
 */
export const SHORTEST_SILENCE = 3 / 4;

/**
 * How long a node must have been silent before it may be evicted, Lifeguard-style: the whole
 * `suspicionTimeoutMs` with no confirmation, shrinking on a logarithmic curve to ¾ of it as the
 * `confirmations` of the `asked` helpers come in (the first ones count most). Never below ¾ of it:
 * that is the longest pause a node survives without being evicted.
 */
export function silenceNeededMs(suspicionTimeoutMs: number, asked: number, confirmations: number): number {
  const shortest = suspicionTimeoutMs * SHORTEST_SILENCE;
  if (asked <= 0) return suspicionTimeoutMs;
  const c = Math.min(Math.max(confirmations, 0), asked);
  const shrink = (suspicionTimeoutMs - shortest) * (Math.log(c + 1) / Math.log(asked + 1));
  return Math.max(shortest, suspicionTimeoutMs - shrink);
}
