// The reporter, a node's reliable channel to the singleton: what reaches the inbox when copies
// report in bulk, and when nothing is acknowledged (issue 34).
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { NodeEnv } from '../../src/actors/node-env.js';
import { spawnReporter } from '../../src/actors/reporter.js';
import { ActorRuntime } from '../../src/actors/runtime.js';
import { runtimeSettings } from '../../src/actors/settings.js';
import { MAX_EVENTS_PER_REPORT, topicsFor, type InboxMessage } from '../../src/actors/wire.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { MemoryBus } from '../../src/cluster/memory-bus.js';
import type { DatasetRef, Incarnation, NodeId, ShardNum } from '../../src/core/ids.js';
import { ShardEvents } from '../../src/core/status.js';

const me = 'n1' as NodeId;
const RESEND_MS = 500;
let runtime: ActorRuntime | undefined;

afterEach(async () => {
  await runtime?.shutdown();
  runtime = undefined;
});

/** Turns of the event loop, for the reporter's messages to run. */
async function turns(n = 20): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
}

async function startReporter() {
  const clock = new SimulatedClock(0);
  const log = pino({ level: 'silent' });
  runtime = new ActorRuntime(`reporter-${Math.floor(performance.now() * 1000)}`, log);
  const bus = new MemoryBus(clock, { retainRecords: 100_000 });
  const topics = topicsFor('test');
  const env = {
    node: me,
    incarnation: 'i-1' as Incarnation,
    runtime,
    clock,
    bus,
    topics,
    settings: runtimeSettings({ reportResendMs: RESEND_MS }),
    log,
  } as unknown as NodeEnv;
  const sent: { at: number; report: Extract<InboxMessage, { kind: 'report' }> }[] = [];
  await bus.subscribe(topics.inbox, 'test-inbox', (record) => {
    sent.push({ at: clock.now(), report: record.value as Extract<InboxMessage, { kind: 'report' }> });
  }, { start: 'earliest' });
  const reporter = spawnReporter(env, runtime.system as never);
  return { clock, reporter, sent };
}

describe('reporter', () => {
  it('sends 65 536 copies\' reports in bounded reports within a few turns of the event loop, not one turn per copy', async () => {
    const { reporter, sent } = await startReporter();
    const copies = 65_536;
    for (let shard = 0; shard < copies; shard++) reporter.report(ShardEvents.ingestionStarted('big' as DatasetRef, shard as ShardNum, me));
    // One message per report made this take 65 536 turns (minutes on a busy node).
    await turns(3 * Math.ceil(copies / MAX_EVENTS_PER_REPORT));
    const events = sent.flatMap((s) => s.report.events);
    expect(events).toHaveLength(copies);
    expect(new Set(events.map((e) => e.shard)).size).toBe(copies);
    expect(sent).toHaveLength(Math.ceil(copies / MAX_EVENTS_PER_REPORT));
    expect(Math.max(...sent.map((s) => s.report.events.length))).toBeLessThanOrEqual(MAX_EVENTS_PER_REPORT);
  });

  it('resends unacknowledged events once per resend period, also when its timer fires with a flush already queued', async () => {
    const { clock, reporter, sent } = await startReporter();
    const dataset = 'alpha' as DatasetRef;
    reporter.report(ShardEvents.ingestionStarted(dataset, 0 as ShardNum, me));
    await turns();
    // A second event's flush is queued, then the resend timer fires behind it: the flush arms a new
    // timer, and the old timer's resend, handled later, used to arm one more without cancelling
    // that one. Two timers ran ever after, and reports went out twice per period (sim seed 131, I16).
    reporter.report(ShardEvents.ingestionStarted(dataset, 1 as ShardNum, me));
    await clock.advance(RESEND_MS);
    await turns(1);
    await clock.advance(RESEND_MS / 5);
    await turns();
    for (let t = 0; t < 50; t++) {
      await clock.advance(RESEND_MS / 10);
      await turns();
    }
    const gaps = sent.slice(1).map((s, i) => s.at - sent[i]!.at);
    expect(sent.length).toBeGreaterThan(5);
    // Past the first reports, one report per resend period.
    expect(Math.min(...gaps.slice(3))).toBeGreaterThanOrEqual(RESEND_MS);
  });
});
