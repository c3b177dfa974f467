// The node coordinator's pure step: which copies a node starts, restates and stops for the maps
// and members it hears, what it logs, what it answers. No actors, no timers: the step alone, with
// the table of running copies handed in as the shell hands it.
import { describe, expect, it } from 'vitest';
import { RECONCILE_SLICE, type CoordinatorMsg } from '../../src/actors/node-coordinator.js';
import { initialCoordinatorState, stepCoordinator, type CoordinatorEffect, type CoordinatorState, type RunningRec } from '../../src/actors/coordinator/step.js';
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import { epoch, incarnation, nodeId, type ShardNum } from '../../src/core/ids.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { ShardEvents, Status, type ShardEvent } from '../../src/core/status.js';

const me = nodeId('n1');
const other = nodeId('n2');
const inc = incarnation('n1#1');
const NUM_SHARDS = 4096; // more than one slice

function config(): DatasetConfig {
  const r = validateDatasetConfig({
    ref: 'ds',
    numShards: NUM_SHARDS,
    minNumNodes: 1,
    replicationFactor: 1,
    strategy: 'balanced',
    source: { type: 'synthetic', recordsPerSecond: 100 },
  });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}
const ref = config().ref;
const s = (n: number) => n as ShardNum;

function mapOf(events: readonly ShardEvent[]): ShardMapper {
  const m = new ShardMapper(NUM_SHARDS, ref);
  for (const e of events) {
    const r = m.updateFromEvent(e);
    if (!r.ok) throw new Error(r.error.message);
  }
  return m;
}

const membersMsg = (at = 1, nodes = [me]): CoordinatorMsg => ({
  type: 'Members',
  members: { epoch: epoch(at), version: 1, members: nodes.map((node) => ({ node, incarnation: node === me ? inc : incarnation(`${node}#1`) })) },
});
const mapMsg = (mapper: ShardMapper, at = 1, shards?: ReadonlySet<number>): CoordinatorMsg => ({
  type: 'MapState',
  dataset: ref,
  epoch: epoch(at),
  mapper,
  config: config(),
  ...(shards ? { shards } : {}),
});

/** Steps the messages in turn, writing the table as the shell does; the effects of each step. */
function run(msgs: readonly CoordinatorMsg[], from: { state?: CoordinatorState; running?: ReadonlyMap<string, RunningRec> } = {}) {
  let state = from.state ?? initialCoordinatorState(me, inc, false);
  const running = new Map(from.running);
  const effects: CoordinatorEffect[][] = [];
  for (const msg of msgs) {
    const stepped = stepCoordinator(state, { msg, running }, 0);
    state = stepped.state;
    effects.push([...stepped.effects]);
    for (const e of stepped.effects) {
      if (e.type === 'Start') running.set(e.key, e.rec);
      if (e.type === 'Update') running.set(e.key, { ...running.get(e.key)!, ...e.set });
      if (e.type === 'Stop') for (const key of e.keys) running.delete(key);
    }
  }
  return { state, running, effects, last: effects.at(-1)! };
}

const starts = (effects: readonly CoordinatorEffect[]) => effects.filter((e) => e.type === 'Start').map((e) => (e.type === 'Start' ? e.key : ''));

function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object' && !ArrayBuffer.isView(o) && !Object.isFrozen(o)) {
    Object.freeze(o);
    for (const v of Object.values(o)) deepFreeze(v);
    if (o instanceof Map) for (const v of o.values()) deepFreeze(v);
  }
  return o;
}

describe('coordinator step: what a map gives the node', () => {
  it('starts the ingesting copies the map gives this node, in one line, once the singleton counts it', () => {
    const mapper = mapOf([
      ShardEvents.assignmentStarted(ref, s(0), me),
      ShardEvents.assignmentStarted(ref, s(2), me),
      ShardEvents.assignmentStarted(ref, s(1), other),
    ]);
    const { last } = run([membersMsg(), mapMsg(mapper)]);
    const token0 = { epoch: epoch(1), version: mapper.assignmentVersion(s(0)) };
    expect(last).toEqual([
      {
        type: 'Start',
        key: 'ds/0',
        config: config(),
        shard: 0,
        rec: { dataset: ref, shard: 0, assignment: token0, statedUnder: token0, status: Status.assigned },
      },
      expect.objectContaining({ type: 'Start', key: 'ds/2', shard: 2 }),
      { type: 'Say', line: { what: 'started', dataset: ref }, lot: { count: 2, sample: ['ds/0', 'ds/2'] } },
    ]);
  });

  it('starts nothing while the singleton does not count this incarnation under the map epoch', () => {
    const mapper = mapOf([ShardEvents.assignmentStarted(ref, s(0), me)]);
    expect(run([mapMsg(mapper)]).last).toEqual([]);
    expect(run([membersMsg(1, [other]), mapMsg(mapper)]).last).toEqual([]);
    expect(run([membersMsg(2), mapMsg(mapper, 1)]).last).toEqual([]);
    // The members that count it come: it reconciles every map it has.
    expect(starts(run([mapMsg(mapper), membersMsg()]).last)).toEqual(['ds/0']);
  });

  it('stops, in one line, the copies a change took from this node, and only looks at the shards it touched', () => {
    const placed = [ShardEvents.assignmentStarted(ref, s(0), me), ShardEvents.assignmentStarted(ref, s(1), me)];
    const before = run([membersMsg(), mapMsg(mapOf(placed))]);
    const moved = mapOf([...placed, ShardEvents.ingestionStopped(ref, s(1), me)]);
    const { last, running } = run([mapMsg(moved, 1, new Set([1]))], before);
    expect(last).toEqual([
      { type: 'Stop', keys: ['ds/1'] },
      { type: 'Say', line: { what: 'stopped', why: 'the map no longer gives them to this node' }, lot: { count: 1, sample: ['ds/1'] } },
    ]);
    expect([...running.keys()]).toEqual(['ds/0']);
  });

  it(`starts a large map ${RECONCILE_SLICE} copies a message, and drops the rest after a StopAll`, () => {
    const all = mapOf(Array.from({ length: NUM_SHARDS }, (_, i) => ShardEvents.assignmentStarted(ref, s(i), me)));
    const first = run([membersMsg(), mapMsg(all)]);
    expect(starts(first.last)).toHaveLength(RECONCILE_SLICE);
    const rest = first.last.at(-1)!;
    expect(rest).toEqual({
      type: 'Send',
      msg: {
        type: 'ReconcileRest',
        dataset: ref,
        wanted: expect.any(Array),
        from: RECONCILE_SLICE,
        started: { count: RECONCILE_SLICE, sample: ['ds/0', 'ds/1', 'ds/2', 'ds/3', 'ds/4'] },
        stopsBefore: 0,
      },
    });
    const restMsg = (rest as { msg: CoordinatorMsg }).msg;
    let next = run([restMsg], first);
    expect(starts(next.last)[0]).toBe(`ds/${RECONCILE_SLICE}`);
    let slices = 2;
    while (next.last.at(-1)?.type === 'Send') {
      next = run([(next.last.at(-1) as { msg: CoordinatorMsg }).msg], next);
      slices += 1;
    }
    expect(slices).toBe(Math.ceil(NUM_SHARDS / RECONCILE_SLICE));
    expect(next.running.size).toBe(NUM_SHARDS);
    // One line for the whole map, said once its last slice started.
    expect(next.last.at(-1)).toEqual({
      type: 'Say',
      line: { what: 'started', dataset: ref },
      lot: { count: NUM_SHARDS, sample: ['ds/0', 'ds/1', 'ds/2', 'ds/3', 'ds/4'] },
    });

    // A fence in between: what was left to start is not started.
    const fenced = run([{ type: 'StopAll', reason: 'fenced' }, restMsg], first);
    expect(fenced.effects[0]![0]).toEqual({ type: 'Stop', keys: starts(first.last) });
    expect(fenced.last).toEqual([]);
    expect(fenced.running.size).toBe(0);
  });
});

describe('coordinator step: copies already running', () => {
  const placed = [ShardEvents.assignmentStarted(ref, s(0), me)];
  const active = (at = 1) => {
    const r = run([membersMsg(at), mapMsg(mapOf(placed), at)]);
    r.running.set('ds/0', { ...r.running.get('ds/0')!, status: Status.active });
    return r;
  };

  it('says the status of a running copy again once for a new assignment, not for every message', () => {
    const before = active();
    const newSingleton = run([membersMsg(2), mapMsg(mapOf(placed), 2)], before);
    const token2 = { epoch: epoch(2), version: mapOf(placed).assignmentVersion(s(0)) };
    expect(newSingleton.effects[1]).toEqual([
      { type: 'Update', key: 'ds/0', set: { assignment: token2, statedUnder: token2 } },
      { type: 'Report', event: ShardEvents.ingestionStarted(ref, s(0), me) },
      { type: 'Say', line: { what: 'restated', dataset: ref }, lot: { count: 1, sample: ['ds/0'] } },
    ]);
    // No restart: nothing stopped or started. And the same map and members again say nothing.
    expect(newSingleton.effects[0]!.filter((e) => e.type !== 'Update')).toEqual([]);
    expect(run([mapMsg(mapOf(placed), 2), membersMsg(2)], newSingleton).effects.flat()).toEqual([]);
  });

  it('keeps a copy that failed until the map gives it under a newer token, then starts it over', () => {
    const before = active();
    const failed = run([], before);
    const stepped = stepCoordinator(failed.state, { msg: { type: 'CopyStatus', key: 'ds/0', status: Status.error('boom') }, running: failed.running }, 0);
    expect(stepped.effects).toEqual([{ type: 'Update', key: 'ds/0', set: { status: Status.error('boom') } }]);
    failed.running.set('ds/0', { ...failed.running.get('ds/0')!, status: Status.error('boom') });
    // The same map again: the failed run is kept.
    expect(run([mapMsg(mapOf(placed))], failed).last).toEqual([]);
    // Taken away for the error and given back: a newer assignment.
    const givenBack = mapOf([...placed, ShardEvents.ingestionError(ref, s(0), me, 'boom'), ShardEvents.assignmentStarted(ref, s(0), me)]);
    const again = run([mapMsg(givenBack)], failed);
    expect(again.last.map((e) => e.type)).toEqual(['Stop', 'Say', 'Start', 'Say']);
    expect(again.last[1]).toMatchObject({ line: { what: 'stopped', why: 'it failed here and the map gives it to this node again: it starts over' } });
  });

  it('takes a failure as under the token its map gives the copy then', () => {
    const before = active();
    const moved = mapOf([...placed, ShardEvents.copyAdded(ref, s(0), other)]);
    const later = run([mapMsg(moved)], before);
    const rec = later.running.get('ds/0')!;
    const now = { epoch: epoch(1), version: moved.assignmentVersion(s(0)) };
    // The map's token moved on while the copy ran (the step follows it), so make it lag behind.
    later.running.set('ds/0', { ...rec, assignment: { epoch: epoch(1), version: 0 } });
    const stepped = stepCoordinator(later.state, { msg: { type: 'CopyStatus', key: 'ds/0', status: Status.error('x') }, running: later.running }, 0);
    expect(stepped.effects).toEqual([{ type: 'Update', key: 'ds/0', set: { status: Status.error('x'), assignment: now } }]);
  });

  it('answers GetRunning and GetRunningSummary with the copies not failed and the token they write under', () => {
    const { state, running } = active();
    running.set('ds/5', {
      dataset: ref,
      shard: s(5),
      assignment: { epoch: epoch(1), version: 1 },
      statedUnder: { epoch: epoch(1), version: 1 },
      status: Status.error('x'),
    });
    const token = { epoch: epoch(1), version: mapOf(placed).assignmentVersion(s(0)) };
    const reply = stepCoordinator(state, { msg: { type: 'GetRunning', reply: () => {} }, running }, 0);
    expect(reply.effects).toEqual([{ type: 'Reply', running: [{ dataset: ref, shard: 0, status: Status.active, writingUnder: token }] }]);
    const summary = stepCoordinator(state, { msg: { type: 'GetRunningSummary', listUpTo: 0, reply: () => {} }, running }, 0);
    expect(summary.effects).toEqual([{ type: 'ReplySummary', summary: { listed: [], counts: { ds: { Active: 1 } } } }]);
  });

  it('stops everything when the dataset goes, or, with a failure detector, when the singleton evicts this incarnation', () => {
    const gone = run([{ type: 'DatasetGone', dataset: ref }], active());
    expect(gone.last).toEqual([
      { type: 'Stop', keys: ['ds/0'] },
      { type: 'Say', line: { what: 'stopped', why: 'the dataset was removed' }, lot: { count: 1, sample: ['ds/0'] } },
    ]);
    const detecting = active();
    const evicted = run([membersMsg(1, [other])], { state: { ...detecting.state, detector: true }, running: detecting.running });
    expect(evicted.last).toEqual([
      { type: 'Stop', keys: ['ds/0'] },
      { type: 'Say', line: { what: 'stopped', why: 'the singleton no longer counts this incarnation as a member' }, lot: { count: 1, sample: ['ds/0'] } },
    ]);
    // Without the detector, a group view without it just stops acting (nothing stopped for it).
    expect(run([membersMsg(1, [other])], active()).last).toEqual([]);
  });

  it('does not change the state or the table it is given', () => {
    const before = active();
    const state: CoordinatorState = deepFreeze(before.state);
    const running = new Map(before.running);
    const snapshot = { maps: [...state.maps.keys()], running: [...running.entries()] };
    const msgs: CoordinatorMsg[] = [membersMsg(2), mapMsg(mapOf(placed), 2), { type: 'DatasetGone', dataset: ref }, { type: 'StopAll', reason: 'x' }];
    for (const msg of msgs) stepCoordinator(state, { msg, running: deepFreeze(running) }, 0);
    expect({ maps: [...state.maps.keys()], running: [...running.entries()] }).toEqual(snapshot);
    expect(state.stopAlls).toBe(0);
  });
});
