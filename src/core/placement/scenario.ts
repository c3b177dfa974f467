// Placement scenarios (placement-peers §2): an initial set of nodes, then membership operations.
// Every strategy and peer replays the same file, and one checker (placement-metrics.ts) scores them.
import { z } from 'zod';
import type { NodeId } from '../ids.js';
import type { PlacementNode } from './placement-types.js';

const node = z.object({ id: z.string().min(1), group: z.string().min(1), weight: z.number().positive().default(1) });
const operation = z.discriminatedUnion('op', [
  z.object({ op: z.literal('add'), node }),
  z.object({ op: z.literal('remove'), id: z.string().min(1) }),
  z.object({ op: z.literal('replace'), old: z.string().min(1), new: z.union([z.string().min(1), node]) }),
  z.object({ op: z.literal('noop') }),
]);
const scenarioSchema = z.object({
  name: z.string().min(1),
  description: z.string().default(''),
  shards: z.number().int().positive(),
  rf: z.number().int().positive(),
  nodes: z.array(node).min(1),
  ops: z.array(operation),
});

export type PlacementScenario = z.infer<typeof scenarioSchema>;
export type ScenarioOperation = z.infer<typeof operation>;

/** Parses a scenario file's JSON; throws with the file's problems, since a bad scenario is a bug. */
export function parseScenario(json: unknown, source = 'scenario'): PlacementScenario {
  const r = scenarioSchema.safeParse(json);
  if (!r.success) throw new Error(`${source}: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return r.data;
}

/** The nodes after `op`. A replacement takes the old node's group (and weight) unless it names its own. */
export function applyOperation(nodes: readonly PlacementNode[], op: ScenarioOperation): PlacementNode[] {
  switch (op.op) {
    case 'add':
      return [...nodes, toNode(op.node)];
    case 'remove':
      return nodes.filter((n) => n.id !== op.id);
    case 'replace': {
      const old = nodes.find((n) => n.id === op.old);
      if (!old) throw new Error(`replace: no node ${op.old}`);
      const fresh = typeof op.new === 'string' ? { ...old, id: op.new as NodeId } : toNode(op.new);
      return nodes.map((n) => (n.id === op.old ? fresh : n));
    }
    case 'noop':
      return [...nodes];
  }
}

/** A label for reports: `add a100`, `remove n007`, `replace n000→n000r`, `noop`. */
export function describeOperation(op: ScenarioOperation): string {
  switch (op.op) {
    case 'add':
      return `add ${op.node.id}`;
    case 'remove':
      return `remove ${op.id}`;
    case 'replace':
      return `replace ${op.old}→${typeof op.new === 'string' ? op.new : op.new.id}`;
    case 'noop':
      return 'noop';
  }
}

export function toNode(n: { id: string; group: string; weight: number }): PlacementNode {
  return { id: n.id as NodeId, group: n.group, weight: n.weight };
}

/** The same scenario with every node its own isolation group (an RF > 1 variant of a one-rack scenario). */
export function withNodeGroups(s: PlacementScenario, rf: number): PlacementScenario {
  const own = <T extends { id: string }>(n: T): T & { group: string } => ({ ...n, group: `node:${n.id}` });
  return {
    ...s,
    name: `${s.name}-rf${rf}`,
    rf,
    nodes: s.nodes.map(own),
    ops: s.ops.map((op): ScenarioOperation => {
      if (op.op === 'add') return { ...op, node: own(op.node) };
      if (op.op === 'replace') return { ...op, new: own(typeof op.new === 'string' ? { id: op.new, weight: 1 } : op.new) };
      return op;
    }),
  };
}
