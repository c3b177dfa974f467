// Log lines carry their time as epoch milliseconds (for machines) and as an ISO string beside it
// (for the operator reading a line): `"time":1764129600000,"at":"2026-11-26T04:00:00.000Z"`.
export function timestampWithIso(): string {
  const now = Date.now();
  return `,"time":${now},"at":"${new Date(now).toISOString()}"`;
}
