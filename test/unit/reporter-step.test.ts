// The reporter's pure step: which events go in which numbered report, when a report goes again,
// what an acknowledgement settles. No actors, no timers: the step alone, with the table of events
// handed in as the shell hands it (written here as the shell writes it).
import { describe, expect, it } from 'vitest';
import { PendingTable } from '../../src/actors/reporter/pending-table.js';
import { initialReporterState, stepReporter, type ReporterEffect, type ReporterInput, type ReporterState } from '../../src/actors/reporter/step.js';
import { incarnation, nodeId, type ShardNum } from '../../src/core/ids.js';
import { ShardEvents, type ShardEvent } from '../../src/core/status.js';
import { MAX_EVENTS_PER_REPORT, WIRE_FORMAT } from '../../src/protocol/wire.js';
import type { DatasetRef } from '../../src/core/ids.js';

const me = nodeId('n1');
const inc = incarnation('n1#1');
const RESEND_MS = 1_000;
const ds = 'ds' as DatasetRef;
const started = (shard: number): ShardEvent => ShardEvents.ingestionStarted(ds, shard as ShardNum, me);

/** A reporter's step with its table, written as the shell writes it. */
function reporter() {
  let state: ReporterState = initialReporterState(me, inc, RESEND_MS);
  const table = new PendingTable();
  const step = (msg: ReporterInput['msg'], now = 0): ReporterEffect[] => {
    const stepped = stepReporter(state, { msg, view: table }, now);
    state = stepped.state;
    for (const e of stepped.effects) {
      if (e.type === 'Pend') table.pend(e.key, e.event);
      if (e.type === 'Sent') table.sent(e.keys, e.seq);
      if (e.type === 'Acked') table.acked(e.keys);
      if (e.type === 'SendAgain') table.sendAgain(e.keys);
    }
    return [...stepped.effects];
  };
  return { step, table, state: () => state };
}

/** Reports these events, flushes, and says the report went on the inbox at `offset`, at `at`. */
function sentAndProduced(r: ReturnType<typeof reporter>, events: readonly ShardEvent[], offset: number, at = 0) {
  for (const e of events) r.step({ type: 'Report', event: e }, at);
  const flushed = r.step({ type: 'Flush' }, at);
  const seq = (flushed.find((e) => e.type === 'Produce') as { seq: number }).seq;
  const produced = r.step({ type: 'Produced', seq, offset }, at);
  return { seq, flushed, produced };
}

describe('reporter step: reports', () => {
  it('queues one flush for events reported together, and ignores the same event while it is on its way', () => {
    const r = reporter();
    expect(r.step({ type: 'Report', event: started(0) })).toEqual([
      { type: 'Pend', key: 'ds/0', event: started(0) },
      { type: 'Send', msg: { type: 'Flush' } },
    ]);
    expect(r.step({ type: 'Report', event: started(1) })).toEqual([{ type: 'Pend', key: 'ds/1', event: started(1) }]);
    expect(r.step({ type: 'Report', event: started(1) })).toEqual([]);
  });

  it(`sends at most ${MAX_EVENTS_PER_REPORT} events a report, in the order reported, numbered, and flushes again for the rest`, () => {
    const r = reporter();
    for (let i = 0; i < MAX_EVENTS_PER_REPORT + 3; i++) r.step({ type: 'Report', event: started(i) });
    const first = r.step({ type: 'Flush' });
    expect(first.map((e) => e.type)).toEqual(['Sent', 'Send', 'Produce']);
    expect(first[2]).toEqual({
      type: 'Produce',
      seq: 1,
      report: {
        format: WIRE_FORMAT,
        kind: 'report',
        node: me,
        incarnation: inc,
        seq: 1,
        events: Array.from({ length: MAX_EVENTS_PER_REPORT }, (_, i) => started(i)),
      },
    });
    const second = r.step({ type: 'Flush' });
    expect(second.map((e) => e.type)).toEqual(['Sent', 'Produce']);
    expect(second[1]).toMatchObject({ seq: 2, report: { seq: 2, events: [started(500), started(501), started(502)] } });
    // Nothing left: a flush sends nothing, and the next report queues a flush again.
    expect(r.step({ type: 'Flush' })).toEqual([]);
    expect(r.step({ type: 'Report', event: started(9999) }).at(-1)).toEqual({ type: 'Send', msg: { type: 'Flush' } });
  });

  it('a newer event of a shard replaces the one waiting to be sent: one event per shard in a report', () => {
    const r = reporter();
    r.step({ type: 'Report', event: ShardEvents.recoveryInProgress(ds, 0 as ShardNum, me, 10) });
    r.step({ type: 'Report', event: started(0) });
    expect(r.step({ type: 'Flush' })[1]).toMatchObject({ type: 'Produce', report: { events: [started(0)] } });
  });
});

describe('reporter step: acknowledgements and resends', () => {
  it('waits for a report past every acknowledgement for 4 × reportResendMs of silence, from when its produce settled', () => {
    const r = reporter();
    const { produced } = sentAndProduced(r, [started(0)], 7, 100);
    expect(produced).toEqual([{ type: 'CancelResend' }, { type: 'Schedule', afterMs: 4 * RESEND_MS, msg: { type: 'Resend', timer: 1 } }]);
    // Acknowledged: the event is done with, and nothing is left to resend.
    expect(r.step({ type: 'Ack', seq: 1 }, 200)).toEqual([{ type: 'Acked', keys: ['ds/0'] }, { type: 'CancelResend' }]);
    expect(r.table.pending.size).toBe(0);
    // The timer armed before fires all the same (its cancel came too late): nothing goes again.
    expect(r.step({ type: 'Resend', timer: 1 }, 10_000)).toEqual([]);
  });

  it('sends a report whose produce failed again after reportResendMs, and fails the handler as the produce did', () => {
    const r = reporter();
    r.step({ type: 'Report', event: started(0) });
    r.step({ type: 'Flush' });
    const error = new Error('broker down');
    expect(r.step({ type: 'Produced', seq: 1, failure: { error } }, 50)).toEqual([
      { type: 'CancelResend' },
      { type: 'Schedule', afterMs: RESEND_MS, msg: { type: 'Resend', timer: 1 } },
      { type: 'Fail', error },
    ]);
    expect(r.step({ type: 'Resend', timer: 1 }, 50 + RESEND_MS)).toEqual([
      { type: 'SendAgain', keys: ['ds/0'] },
      { type: 'Resent', cause: 'lost', events: 1 },
      {
        type: 'Log',
        level: 'debug',
        fields: { lost: 1, silence: 0, pending: 1, seq: 1, quietResends: 0 },
        text: 'reports not acknowledged in time: sending them again',
      },
      { type: 'Send', msg: { type: 'Flush' } },
    ]);
    expect(r.step({ type: 'Flush' }, 50 + RESEND_MS)[1]).toMatchObject({ type: 'Produce', seq: 2, report: { events: [started(0)] } });
  });

  it('an acknowledgement of a later report leaves an earlier one not acknowledged: only its own events are done with', () => {
    const r = reporter();
    sentAndProduced(r, [started(0)], 1);
    sentAndProduced(r, [started(1)], 2);
    expect(r.step({ type: 'Ack', seq: 2 })[0]).toEqual({ type: 'Acked', keys: ['ds/1'] });
    expect([...r.table.pending.keys()]).toEqual(['ds/0']);
    // Report 1 is before one acknowledged: lost, it goes again reportResendMs after its produce.
    expect(r.state().resendAt).toBe(RESEND_MS);
  });

  it('hears of a lost report when an acknowledgement to anyone passes its offset, and only then', () => {
    const r = reporter();
    sentAndProduced(r, [started(0)], 5);
    expect(r.step({ type: 'Acknowledged', passed: 5 }, 10)).toEqual([]);
    expect(r.step({ type: 'Acknowledged', passed: undefined }, 20)).toEqual([]);
    expect(r.step({ type: 'Acknowledged', passed: 6 }, 30)).toEqual([{ type: 'Send', msg: { type: 'Heard' } }]);
    // Heard: the resend is armed sooner, reportResendMs after the produce.
    expect(r.step({ type: 'Heard' }, 30)).toEqual([{ type: 'CancelResend' }, { type: 'Schedule', afterMs: RESEND_MS - 30, msg: { type: 'Resend', timer: 2 } }]);
  });

  it('doubles the silence waited for with each resend of a report past every acknowledgement, up to 16 ×', () => {
    const r = reporter();
    sentAndProduced(r, [started(0)], 1);
    let now = 4 * RESEND_MS;
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      const again = r.step({ type: 'Resend', timer: r.state().resendTimers }, now);
      expect(again[1]).toEqual({ type: 'Resent', cause: 'silence', events: 1 });
      const { produced } = sentAndProduced(r, [], 1 + i, now);
      const wait = (produced[1] as { afterMs: number }).afterMs;
      waits.push(wait);
      now += wait;
    }
    expect(waits).toEqual([8, 16, 16, 16].map((f) => f * RESEND_MS));
  });

  it('does not change the state it is given', () => {
    const r = reporter();
    sentAndProduced(r, [started(0), started(1)], 3);
    const state = deepFreeze(r.state());
    const inFlight = [...state.inFlight.entries()];
    const msgs: ReporterInput['msg'][] = [
      { type: 'Report', event: started(2) },
      { type: 'Flush' },
      { type: 'Ack', seq: 1 },
      { type: 'Resend', timer: state.resendTimers },
      { type: 'Acknowledged', passed: 9 },
      { type: 'Produced', seq: 1, offset: 4 },
    ];
    for (const msg of msgs) stepReporter(state, { msg, view: r.table }, 99_999);
    expect([...state.inFlight.entries()]).toEqual(inFlight);
    expect(state.seq).toBe(1);
    expect(r.table.pending.size).toBe(2);
  });
});

function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object' && !Object.isFrozen(o)) {
    Object.freeze(o);
    for (const v of Object.values(o)) deepFreeze(v);
    if (o instanceof Map) for (const v of o.values()) deepFreeze(v);
  }
  return o;
}
