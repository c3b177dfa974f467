// Times in notices as operators read them: ISO 8601 in UTC. The core may not construct a `Date`
// (it is pure: lint forbids wall-clock dates), so the calendar is computed here from the epoch
// milliseconds it is given (Howard Hinnant's `civil_from_days`).

const MS_PER_DAY = 86_400_000;

const pad = (n: number, width = 2): string => String(n).padStart(width, '0');

/** `ms` since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.sssZ`, what `Date.prototype.toISOString` gives for years 0–9999. */
export function isoTime(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  const t = Math.floor(ms);
  const days = Math.floor(t / MS_PER_DAY);
  const inDay = t - days * MS_PER_DAY;
  // Days since 1970-01-01 to a civil date, in 400-year eras that start on 0000-03-01.
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  const h = Math.floor(inDay / 3_600_000);
  const m = Math.floor((inDay % 3_600_000) / 60_000);
  const s = Math.floor((inDay % 60_000) / 1000);
  return `${pad(year, 4)}-${pad(month)}-${pad(day)}T${pad(h)}:${pad(m)}:${pad(s)}.${pad(inDay % 1000, 3)}Z`;
}

/** A time for a notice: ISO, with the raw milliseconds beside it. */
export const noticeTime = (ms: number): string => `${isoTime(ms)} (${ms})`;
