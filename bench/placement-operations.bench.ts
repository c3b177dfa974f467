/**
 * `npm run bench -- placement-operations` (also run by `npm run bench -- placement`): multi-event
 * operations through the singleton's `ShardManager.decide` on a `balanced` dataset (see
 * bench/placement/operations.ts): a rolling restart of every node (goal: 0 copies created), a rack
 * lost node by node, a replacement seen as a node down then a node up, and k nodes added one at a
 * time (goal: the one-decision minimum). Each runs with the defaults (replacementDelayMs 60 000,
 * settleWindowMs 1000) and with neither (every change decided at once, nothing kept: the behaviour
 * before them), and is compared with the copies one strategy decision creates for the final members.
 */
import { DEFAULT_REPLACEMENT_DELAY_MS } from '../src/index.js';
import { DEFAULT_SETTLE_WINDOW_MS } from '../src/entries/core.js';
import { register, type Table } from './harness.js';
import { CATCH_UP_MS, type ClusterShape, type OperationEvent, runOperation, type Settings } from './placement/operations.js';

const DEFAULTS: Settings = { label: 'defaults', replacementDelayMs: DEFAULT_REPLACEMENT_DELAY_MS, settleWindowMs: DEFAULT_SETTLE_WINDOW_MS };
const NONE: Settings = { label: 'none', replacementDelayMs: 0, settleWindowMs: 0 };

const racked = (racks: number, perRack: number): (readonly [string, string])[] =>
  Array.from(
    { length: racks * perRack },
    (_, i) => [`${String.fromCharCode(97 + (i % racks))}${Math.floor(i / racks) + 1}`, `rack-${String.fromCharCode(97 + (i % racks))}`] as const,
  );

const SHAPES: readonly ClusterShape[] = [
  { label: '512 × RF 3, 3 racks × 4 nodes', shards: 512, rf: 3, nodes: racked(3, 4) },
  { label: '512 × RF 2, 4 racks × 3 nodes', shards: 512, rf: 2, nodes: racked(4, 3) },
  { label: '512 × RF 1, 3 racks × 4 nodes', shards: 512, rf: 1, nodes: racked(3, 4) },
];

/** Restart: a node down, back 15 s later (a process restart), the next one once its copies caught up. */
const RESTART_MS = 15_000;
const NEXT_NODE_MS = RESTART_MS + CATCH_UP_MS + 5_000;

interface Operation {
  readonly label: string;
  readonly goal: string;
  readonly events: (shape: ClusterShape) => OperationEvent[];
}

const rackOf = (shape: ClusterShape, node: string): string => shape.nodes.find(([n]) => n === node)![1];
const firstRack = (shape: ClusterShape): string[] => shape.nodes.filter(([, r]) => r === shape.nodes[0]![1]).map(([n]) => n);
const racks = (shape: ClusterShape): string[] => [...new Set(shape.nodes.map(([, r]) => r))];

const OPERATIONS: readonly Operation[] = [
  {
    label: 'rolling restart of every node (down, back 15 s later)',
    goal: '0',
    events: (shape) =>
      shape.nodes.flatMap(([node, rack], i) => [
        { at: i * NEXT_NODE_MS, kind: 'down', node },
        { at: i * NEXT_NODE_MS + RESTART_MS, kind: 'up', node, rack },
      ]),
  },
  ...[300, 5_000].map((gap): Operation => ({
    label: `a rack lost node by node, ${gap} ms apart`,
    goal: 'minimum',
    events: (shape) => firstRack(shape).map((node, i) => ({ at: i * gap, kind: 'down', node })),
  })),
  ...[500, 20_000].map((gap): Operation => ({
    label: `a replacement: a node down, its replacement up ${gap} ms later`,
    goal: 'minimum',
    events: (shape) => {
      const old = shape.nodes[0]![0];
      return [
        { at: 0, kind: 'down', node: old },
        { at: gap, kind: 'up', node: `${old}r`, rack: rackOf(shape, old) },
      ];
    },
  })),
  {
    // Longer than one settle window: each join moves the window's end, so it is still one decision.
    label: 'a new rack of 5 nodes added node by node, 300 ms apart',
    goal: 'minimum',
    events: () => Array.from({ length: 5 }, (_, i) => ({ at: i * 300, kind: 'up', node: `r${i + 1}`, rack: 'rack-new' })),
  },
  ...[300, 5_000].map((gap): Operation => ({
    label: `3 nodes added one at a time (one per rack), ${gap} ms apart`,
    goal: 'minimum',
    events: (shape) =>
      racks(shape)
        .slice(0, 3)
        .map((rack, i) => ({ at: i * gap, kind: 'up', node: `new${i + 1}`, rack })),
  })),
];

register({
  name: 'placement-operations',
  run(): Table {
    const rows: (string | number)[][] = [];
    for (const shape of SHAPES) {
      for (const op of OPERATIONS) {
        const events = op.events(shape);
        const withDefaults = runOperation(shape, events, DEFAULTS);
        const without = runOperation(shape, events, NONE);
        const goal = op.goal === '0' ? '0' : `${withDefaults.minimum} (one decision)`;
        // At RF 1 a lost node's copies have no other serving copy: they are placed at once
        // (availability first), and its return or replacement is a second decision.
        const losesAlone = shape.rf === 1 && events.some((e) => e.kind === 'down');
        console.log(JSON.stringify({ cluster: shape.label, operation: op.label, events: events.length, defaults: withDefaults, none: without }));
        rows.push([
          shape.label,
          op.label,
          events.length,
          withDefaults.created,
          without.created,
          losesAlone ? `${goal}: not at RF 1` : goal,
          `${withDefaults.rounds} / ${without.rounds}`,
          `${withDefaults.maxUnserved} / ${without.maxUnserved}`,
          `${(withDefaults.settledMs / 1000).toFixed(1)} / ${(without.settledMs / 1000).toFixed(1)}`,
        ]);
      }
    }
    return {
      title: 'Placement: operations of several membership events, through ShardManager.decide (balanced dataset)',
      columns: [
        'cluster',
        'operation',
        'events',
        'copies created (defaults)',
        'copies created (no delay, no window)',
        'goal',
        'decisions that changed copies: defaults / none',
        'most shards unserved: defaults / none',
        'last change of the map after s: defaults / none',
      ],
      rows,
      notes: [
        `defaults: replacementDelayMs ${DEFAULT_REPLACEMENT_DELAY_MS}, settleWindowMs ${DEFAULT_SETTLE_WINDOW_MS}; none: both 0, every change decided at once and nothing kept (the behaviour before them).`,
        `Simulated clock: events at their times, the singleton's timers (ScheduleCheck) fired when due, every new copy caught up ${CATCH_UP_MS} ms after it was given; run until nothing is left to happen. Restarted nodes come back under the same id, ${RESTART_MS / 1000} s after they went down; the next one goes ${NEXT_NODE_MS / 1000} s after the previous one did.`,
        'copies created: a node given a copy of a shard it did not hold, counted decision by decision over the whole operation (a copy created and dropped again counts). one decision: the copies one decision of the balanced strategy creates from the start map for the final members, the least any sequence of decisions can create.',
        'Goal "not at RF 1": a lost single copy has no other serving copy, so it is placed again at once (availability first); the node\'s return or its replacement then takes its share back in a second decision.',
        "decisions that changed copies: those that gave or removed a copy (a handoff's end included). most shards unserved: the largest number of shards without a serving copy after any decision (a single-copy shard of a lost node is unserved until its new copy caught up).",
      ],
    };
  },
});
