/**
 * `npm run bench -- placement`: every placement scenario (the standard ones of placement-peers §2–§3
 * and the project's own in bench/scenarios/placement/), each replayed by every placer that supports
 * its replication factor, and the single-rack scenarios again at RF 2 with every node its own
 * isolation group. One JSON line per (strategy, scenario, step) on stdout, then a summary table.
 */
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  applyOperation,
  describeOperation,
  parseScenario,
  type Placement,
  placementMetrics,
  type PlacementScenario,
  toNode,
  withNodeGroups,
} from '../src/entries/core.js';
import { quantile, register, type Table } from './harness.js';
import { PLACERS, type Placer } from './placement/peers.js';

const here = path.dirname(fileURLToPath(import.meta.url));
/** The standard scenarios live beside the project; SHARDHERD_PLACEMENT_SCENARIOS points elsewhere. */
const STANDARD_DIR = process.env.SHARDHERD_PLACEMENT_SCENARIOS ?? path.resolve(here, '../../shared/scenarios/placement');
const OWN_DIR = path.join(here, 'scenarios/placement');
/** placement-peers §2 M5: 20 warm-up calls, then the median of at least 100. */
const WARMUP = 20;
const SAMPLES = 100;
/** Steps of long rolling scenarios beyond this are timed with fewer calls (the figure says how many). */
const FULLY_TIMED_STEPS = 8;
const SHORT_SAMPLES = 10;

function loadScenarios(): PlacementScenario[] {
  const dirs = [STANDARD_DIR, OWN_DIR].filter((d) => existsSync(d));
  if (!existsSync(STANDARD_DIR))
    console.error(`placement: no standard scenarios in ${STANDARD_DIR} (set SHARDHERD_PLACEMENT_SCENARIOS); running the project's own only`);
  const files = dirs.flatMap((d) =>
    readdirSync(d)
      .filter((f) => f.endsWith('.json'))
      .sort()
      .map((f) => path.join(d, f)),
  );
  const scenarios = files.map((f) => parseScenario(JSON.parse(readFileSync(f, 'utf8')), f));
  const singleRack = scenarios.filter((s) => s.rf === 1 && new Set(s.nodes.map((n) => n.group)).size === 1);
  return [...scenarios, ...singleRack.map((s) => withNodeGroups(s, 2))];
}

function time(fn: () => unknown, samples: number): number[] {
  for (let i = 0; i < WARMUP; i++) fn();
  const out: number[] = [];
  for (let i = 0; i < samples; i++) {
    const t0 = process.hrtime.bigint();
    fn();
    out.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return out;
}

const deepCopy = (p: Placement): Placement => p.map((copies) => [...copies]);

interface StepLine {
  strategy: string;
  scenario: string;
  step: number;
  op: string;
  moves: number;
  lb_moves: number;
  spread: number;
  lb_spread: number;
  iso_violations: number;
  duplicates: number;
  uncovered: number;
  ownerless_rounds: number;
  max_in: number;
  max_out: number;
  decide_ms_p50: number;
  decide_ms_p99: number;
  copy_floor_ms: number;
  samples: number;
}

/**
 * Shards with no serving copy for a round: with a planned handoff only shards that had no copy
 * before (the old copy serves until the new one has caught up); without one, every shard whose
 * copies all changed. The initial placement (step 0) is not counted: every placer starts there.
 */
function ownerlessRounds(placer: Placer, before: Placement, after: Placement, live: ReadonlySet<string>): number {
  let n = 0;
  after.forEach((now, s) => {
    const was = (before[s] ?? []).filter((id) => placer.handoff || live.has(id));
    const continuing = placer.handoff ? was.length > 0 : now.some((id) => was.includes(id));
    if (!continuing) n++;
  });
  return n;
}

function replay(placer: Placer, scenario: PlacementScenario): StepLine[] {
  let nodes = scenario.nodes.map(toNode);
  const run = placer.start(scenario.shards, scenario.rf, nodes);
  let before: Placement = Array.from({ length: scenario.shards }, () => []);
  const lines: StepLine[] = [];
  const steps = [{ op: 'initial', nodes }, ...scenario.ops.map((op) => ({ op: describeOperation(op), nodes: (nodes = applyOperation(nodes, op)) }))];
  steps.forEach((step, k) => {
    const { placement, time: again } = run.decide(step.nodes);
    const samples = k <= FULLY_TIMED_STEPS ? SAMPLES : SHORT_SAMPLES;
    const decide = time(again, samples);
    const copy = time(() => deepCopy(placement), samples);
    const m = placementMetrics(before, placement, scenario.rf, step.nodes);
    const live = new Set<string>(step.nodes.map((n) => n.id));
    lines.push({
      strategy: placer.name,
      scenario: scenario.name,
      step: k,
      op: step.op,
      moves: m.moves,
      lb_moves: m.lbMoves,
      spread: m.spread,
      lb_spread: m.lbSpread,
      iso_violations: m.isoViolations,
      duplicates: m.duplicates,
      uncovered: m.uncovered,
      ownerless_rounds: k === 0 ? 0 : ownerlessRounds(placer, before, placement, live),
      max_in: m.maxIn,
      max_out: m.maxOut,
      decide_ms_p50: round(quantile(decide, 0.5)),
      decide_ms_p99: round(quantile(decide, 0.99)),
      copy_floor_ms: round(quantile(copy, 0.5)),
      samples,
    });
    before = placement;
  });
  return lines;
}

const round = (v: number): number => Math.round(v * 1000) / 1000;

function summary(lines: readonly StepLine[]): Table {
  const rows: (string | number)[][] = [];
  const keys = [...new Set(lines.map((l) => `${l.scenario}\u0000${l.strategy}`))];
  for (const key of keys) {
    const [scenario, strategy] = key.split('\u0000') as [string, string];
    const all = lines.filter((l) => l.scenario === scenario && l.strategy === strategy);
    const changes = all.filter((l) => l.step > 0 && l.op !== 'noop');
    const moves = changes.reduce((n, l) => n + l.moves, 0);
    const lb = changes.reduce((n, l) => n + l.lb_moves, 0);
    const offSpread = all.filter((l) => l.spread > l.lb_spread).length;
    const last = all[all.length - 1]!;
    // Decision time of the membership changes; the initial placement (from nothing) on its own.
    const timed = all.length > 1 ? all.slice(1) : all;
    const p50s = timed.map((l) => l.decide_ms_p50);
    rows.push([
      scenario,
      strategy,
      all.length,
      changes.length === 0 ? '–' : `${moves} / ${lb}`,
      changes.length === 0 || lb === 0 ? '–' : (moves / lb).toFixed(2),
      `${round(last.spread)} / ${last.lb_spread}`,
      `${offSpread}`,
      Math.max(...all.map((l) => l.iso_violations)) + Math.max(...all.map((l) => l.duplicates)),
      Math.max(...all.map((l) => l.uncovered)),
      all.reduce((n, l) => n + l.ownerless_rounds, 0),
      all[0]!.decide_ms_p50.toFixed(2),
      quantile(p50s, 0.5).toFixed(2),
      `${(
        quantile(p50s, 0.5) /
        Math.max(
          1e-6,
          quantile(
            timed.map((l) => l.copy_floor_ms),
            0.5,
          ),
        )
      ).toFixed(1)}×`,
    ]);
  }
  return {
    title: 'Placement: standard scenarios (placement-peers §2–§3), every step',
    columns: [
      'scenario',
      'strategy',
      'steps',
      'moves / LB',
      'moves/LB',
      'final spread / LB',
      'steps above spread LB',
      'iso + dup',
      'max uncovered',
      'ownerless rounds',
      'initial ms',
      'decide ms (changes)',
      '÷ copy floor',
    ],
    rows,
    notes: [
      'moves / LB summed over the steps that change membership (not the initial placement, not noop); LB = placement-peers §3.3 from the map before each step.',
      '-rf2 scenarios: a one-rack scenario at RF 2 with every node its own isolation group (only the balanced strategy places replicas).',
      `decide = ${WARMUP} warm-up calls then the median of ${SAMPLES} (${SHORT_SAMPLES} after step ${FULLY_TIMED_STEPS} of long rolling scenarios); initial = the placement from nothing; decide (changes) = median over the later steps of their medians; copy floor = deep copy of the same assignment, same run.`,
      'filodb-default runs through ShardManager.decide (the whole singleton decision); effect-hashring builds the ring and calls getShards.',
    ],
  };
}

register({
  name: 'placement',
  async run(): Promise<Table> {
    const lines: StepLine[] = [];
    // One unrecorded pass over the small scenarios first: otherwise the first scenario measured
    // pays for the JIT compiling the strategy's code, not for its decisions.
    for (const scenario of loadScenarios().filter((s) => s.shards <= 1024)) {
      for (const placer of PLACERS) if (placer.supports(scenario.rf)) replay(placer, scenario);
    }
    for (const scenario of loadScenarios()) {
      for (const placer of PLACERS) {
        if (!placer.supports(scenario.rf)) continue;
        for (const line of replay(placer, scenario)) {
          console.log(JSON.stringify(line));
          lines.push(line);
        }
      }
    }
    return summary(lines);
  },
});
