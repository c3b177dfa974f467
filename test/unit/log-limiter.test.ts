// A node-wide outage fails every copy's call at once; each copy retrying used to log each attempt
// (118 840 lines of one retry on one node, issue 34). Now one line per cause and 10 s, and one at
// the window's end says how many more there were: every failure is in a line, none silent.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { withRetry } from '../../src/actors/node-env.js';
import { runtimeSettings } from '../../src/actors/settings.js';
import { SimulatedClock } from '../../src/cluster/clock.js';

class Outage extends Error {
  readonly retriable = true;
}

describe('retries of many copies during an outage', () => {
  it('log one line per cause and window, and one at its end counting the others', async () => {
    const clock = new SimulatedClock(0);
    const lines: { event?: string; failures?: number; msg: string }[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as { msg: string }) });
    const env = { clock, log, settings: runtimeSettings({ retryInitialMs: 1_000, retryMaxMs: 4_000 }) };
    const COPIES = 200;
    const FAILURES = 5; // each: 1, 2, 4, 4, 4 s of backoff: 15 s of outage
    const calls = Array.from({ length: COPIES }, () => {
      let failed = 0;
      return withRetry(env, 'reading the checkpoint', async () => {
        if (failed < FAILURES) {
          failed += 1;
          throw new Outage('the store is down');
        }
        return 'read';
      });
    });
    for (let t = 0; t < 30_000; t += 500) {
      clock.advance(500);
      for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    }
    expect(await Promise.all(calls)).toEqual(Array(COPIES).fill('read'));
    const retries = lines.filter((l) => l.event === 'retry');
    // The outage lasted 15 s: two windows, each a first line and a count at its end.
    expect(retries.length).toBeGreaterThanOrEqual(2);
    expect(retries.length).toBeLessThanOrEqual(4);
    // Each failure is in a line: the first of each window, or the count at its end.
    expect(retries.reduce((n, l) => n + (l.failures ?? 1), 0)).toBe(COPIES * FAILURES);
    expect(retries[1]!.msg).toMatch(/failed \d+ more time\(s\) on this node in the last 10 s, for the same cause/);
  });
});
