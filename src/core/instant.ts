/**
 * An instant (ms since the epoch, as the core's clock gives them) as an ISO 8601 string in UTC, for
 * messages people read: "2026-11-27T09:30:00.000Z" says when, 1795771800000 does not. It formats the
 * instant it is given and reads no clock.
 */
export function isoInstant(ms: number): string {
  // Date's range is ±8.64e15 ms; beyond it (or NaN) toISOString throws: such a number is shown as it is.
  return Math.abs(ms) <= 8.64e15 ? new Date(ms).toISOString() : String(ms);
}
