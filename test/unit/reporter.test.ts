// The reporter, a node's reliable channel to the singleton: what reaches the inbox when copies
// report in bulk, and when nothing is acknowledged (issue 34).
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { NodeEnv } from '../../src/actors/node-env.js';
import { spawnReporter } from '../../src/actors/reporter.js';
import { ActorRuntime } from '../../src/actors/runtime.js';
import { NO_TELEMETRY } from '../../src/actors/telemetry.js';
import { runtimeSettings } from '../../src/actors/settings.js';
import { MAX_EVENTS_PER_REPORT, topicsFor, type InboxMessage } from '../../src/protocol/wire.js';
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
    telemetry: NO_TELEMETRY,
  } as unknown as NodeEnv;
  const sent: { at: number; offset: number; report: Extract<InboxMessage, { kind: 'report' }> }[] = [];
  await bus.subscribe(
    topics.inbox,
    'test-inbox',
    (record) => {
      sent.push({ at: clock.now(), offset: record.offset, report: record.value as Extract<InboxMessage, { kind: 'report' }> });
    },
    { start: 'earliest' },
  );
  const reporter = spawnReporter(env, runtime.system as never);
  /** The singleton acknowledges report `seq` of this node, as the node's guardian hears it. */
  const ack = async (seq: number) => {
    runtime!.send(reporter.ref, { type: 'Ack', seq });
    reporter.acknowledged(1, sent.find((x) => x.report.seq === seq)!.offset + 1, undefined);
    await turns();
  };
  return { clock, reporter, sent, bus, topics, ack };
}

describe('reporter', () => {
  it("sends 65 536 copies' reports in bounded reports within a few turns of the event loop, not one turn per copy", async () => {
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

  it('resends unacknowledged events at most once per resend period, also when its timer fires with a flush already queued', async () => {
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
    for (let t = 0; t < 400; t++) {
      await clock.advance(RESEND_MS / 10);
      await turns();
    }
    const gaps = sent.slice(1).map((s, i) => s.at - sent[i]!.at);
    expect(sent.length).toBeGreaterThan(3);
    // Past the first reports, at most one report per resend period.
    expect(Math.min(...gaps.slice(2))).toBeGreaterThanOrEqual(RESEND_MS);
  });

  it('waits ever longer while the singleton acknowledges nothing: 4 periods, then each resend doubles the silence it waits for, up to 16', async () => {
    const { clock, reporter, sent } = await startReporter();
    reporter.report(ShardEvents.ingestionStarted('alpha' as DatasetRef, 0 as ShardNum, me));
    await turns();
    for (let t = 0; t < 700; t++) {
      await clock.advance(RESEND_MS / 10);
      await turns(3);
    }
    const gaps = sent.slice(1).map((s, i) => (s.at - sent[i]!.at) / RESEND_MS);
    // 70 periods of silence: sent at 0, then after 4, 8, 16, 16 and 16 periods.
    expect(gaps.map(Math.round)).toEqual([4, 8, 16, 16, 16]);
  });

  it('does not send again what waits in the inbox behind reports the singleton is still acknowledging; sends again at once what it skipped', async () => {
    const { clock, reporter, sent, ack } = await startReporter();
    const dataset = 'alpha' as DatasetRef;
    // Three reports in flight; the singleton lags, acknowledging one per resend period, the second
    // never (its record lost on the way).
    for (let shard = 0; shard < 3; shard++) {
      reporter.report(ShardEvents.ingestionStarted(dataset, shard as ShardNum, me));
      await turns();
    }
    expect(sent.map((s) => s.report.seq)).toEqual([1, 2, 3]);
    await clock.advance(RESEND_MS * 0.9);
    await turns();
    await ack(1);
    await clock.advance(RESEND_MS * 0.9);
    await turns();
    // Report 2 is older than nothing acknowledged yet, and 3 is behind it: nothing goes again,
    // although both were sent more than a resend period ago.
    expect(sent).toHaveLength(3);
    await ack(3);
    // 3 was acknowledged, 2 never will be: it was lost, and goes again (its period has passed).
    await clock.advance(1);
    await turns();
    expect(sent.slice(3).map((s) => s.report.events.map((e) => e.shard))).toEqual([[1]]);
  });

  it('hears from acknowledgements to other nodes: a lagging singleton moving on gets nothing twice, one that passed a report of this node gets it again', async () => {
    const { clock, reporter, sent, bus, topics } = await startReporter();
    const dataset = 'alpha' as DatasetRef;
    reporter.report(ShardEvents.ingestionStarted(dataset, 0 as ShardNum, me));
    await turns();
    // The singleton is 30 periods behind this report: it acknowledges other nodes' reports, written
    // before this one, twice a period. Nothing goes again: the report waits its turn.
    for (let t = 0; t < 60; t++) {
      await clock.advance(RESEND_MS / 2);
      reporter.acknowledged(1, sent[0]!.offset, undefined);
      await turns();
    }
    expect(sent).toHaveLength(1);
    // Another node's report, written after this one, is acknowledged: this one was passed (dropped
    // by a new singleton as written before its takeover, say) and goes again at once.
    const later = await bus.produce(topics.inbox, { note: "another node's report" });
    reporter.acknowledged(1, later + 1, undefined);
    await turns();
    await clock.advance(1);
    await turns();
    expect(sent.filter((x) => x.report.seq !== undefined).map((x) => x.report.events.map((e) => e.shard))).toEqual([[0], [0]]);
  });

  // The acknowledgements are on the replies topic, the digests on the events topic: a node that
  // read a digest ahead of its replies took its own acknowledged reports for lost (34 525 resent in
  // a join wave whose guardian fell behind, issue 34).
  it('believes a digest that passed a report of this node only once it read the acknowledgements sent before it', async () => {
    const { clock, reporter, sent } = await startReporter();
    const dataset = 'alpha' as DatasetRef;
    reporter.report(ShardEvents.ingestionStarted(dataset, 0 as ShardNum, me));
    await turns();
    // The singleton acknowledged it (its 7th acknowledgement) and then wrote a digest past it; the
    // digest is read first. Nothing goes again, however long the acknowledgement takes.
    reporter.digest(1, sent[0]!.offset + 1, 7);
    await turns();
    await clock.advance(RESEND_MS * 3);
    await turns();
    expect(sent).toHaveLength(1);
    runtime!.send(reporter.ref, { type: 'Ack', seq: 1 });
    reporter.acknowledged(1, sent[0]!.offset + 1, 7);
    await turns();
    await clock.advance(RESEND_MS * 20);
    await turns();
    expect(sent).toHaveLength(1);

    // A second report the singleton dropped: the digest past it counts at once when every
    // acknowledgement it counts was read, and the report goes again.
    reporter.report(ShardEvents.ingestionStarted(dataset, 1 as ShardNum, me));
    await turns();
    await clock.advance(RESEND_MS);
    reporter.digest(1, sent[1]!.offset + 1, 7);
    await turns();
    await clock.advance(1);
    await turns();
    expect(sent.map((x) => x.report.events.map((e) => e.shard))).toEqual([[0], [1], [1]]);
  });

  it('believes a digest whose acknowledgements never come after the silence it waits for anyway', async () => {
    const { clock, reporter, sent } = await startReporter();
    reporter.report(ShardEvents.ingestionStarted('alpha' as DatasetRef, 0 as ShardNum, me));
    await turns();
    // Digests every period say the report was passed, after an acknowledgement this node never reads.
    for (let t = 0; t < 10; t++) {
      await clock.advance(RESEND_MS);
      reporter.digest(1, sent[0]!.offset + 1, 3);
      await turns();
      await clock.advance(1);
      await turns();
    }
    // Not before 4 periods (the digests kept the singleton heard, so no silence rule either).
    const again = sent.slice(1);
    expect(again.length).toBeGreaterThan(0);
    expect((again[0]!.at - sent[0]!.at) / RESEND_MS).toBeGreaterThanOrEqual(4);
  });
});
