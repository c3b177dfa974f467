// The status page's data: the cluster view in a form a page can hold for thousands of shards (node
// names once in a table, statuses and placements as letters), and what differs between two such
// views, which is all the page's event stream sends after its first snapshot.
import { StringTable } from '../core/string-table.js';
import type { ShardStatusType } from '../core/status.js';
import type { ClusterView, MemberView, ShardView, SingletonView } from './cluster-view.js';

/** A status as one letter (the map codec's, docs/ARCHITECTURE.md §10). */
export const STATUS_LETTERS = { Active: 'A', Recovery: 'R', Assigned: 'N', Error: 'E', Stopped: 'S', Down: 'D', Unassigned: 'U' } as const satisfies Record<
  ShardStatusType,
  string
>;
export const PLACEMENT_LETTERS: Readonly<Record<string, string>> = { Initializing: 'I', Available: 'A', Leaving: 'L' };
const STATUS_NAMES = Object.fromEntries(Object.entries(STATUS_LETTERS).map(([name, letter]) => [letter, name])) as Record<string, ShardStatusType>;
const PLACEMENT_NAMES = Object.fromEntries(Object.entries(PLACEMENT_LETTERS).map(([name, letter]) => [letter, name]));
export const statusName = (letter: string): string => STATUS_NAMES[letter] ?? letter;
export const placementName = (letter: string): string => PLACEMENT_NAMES[letter] ?? letter;

/** One copy: node (index into the node table), placement letter, status letter, and its error when in Error. */
export type PageCopy = readonly [node: number, placement: string, status: string, error?: string];

/** What a shard has besides its status and copies, when it has anything. */
export interface ShardDetail {
  /** Recovery progress (%). */
  readonly p?: number;
  /** The shard's ingestion error (status Error). */
  readonly e?: string;
  /** Why it has fewer copies than its replication factor. */
  readonly r?: string;
}

/** One shard: its status letter, its copies, and details when it has any. */
export type PageShard = readonly [status: string, copies: readonly PageCopy[], detail?: ShardDetail];

export interface PageDatasetHeader {
  readonly name: string;
  readonly epoch: number;
  readonly version: number;
  /** Shards per status shown (letters). */
  readonly counts: Readonly<Record<string, number>>;
  readonly mapUnavailable?: string;
}

export interface PageDataset extends PageDatasetHeader {
  readonly numShards: number;
  readonly replicationFactor: number;
  readonly minNumNodes: number;
  readonly strategy: string;
  /** Every shard, by number; empty when the map is unavailable. */
  readonly shards: readonly PageShard[];
}

/** Everything the page shows but ingestion, as of `at`. */
export interface PageView {
  readonly at: number;
  /** The node table: copies name nodes by their index here. Only ever grows, so indexes stay valid. */
  readonly nodes: readonly string[];
  readonly answeredBy: ClusterView['answeredBy'];
  readonly singleton: SingletonView | null;
  readonly members: readonly PageMember[];
  readonly operations: ClusterView['operations'];
  readonly problems: ClusterView['problems'];
  readonly datasets: readonly PageDataset[];
}

/**
 * A member without its copy count: the page counts copies from the shards it holds, and a count
 * in each member would send every member again whenever a shard moves.
 */
export type PageMember = Omit<MemberView, 'copies'>;

/** A change the timeline shows: one shard's (status or copies), or the cluster's (members, singleton, datasets, drains). */
export interface TimelineEvent {
  readonly at: number;
  readonly dataset?: string;
  readonly shard?: number;
  /** Status letters before and after, for a shard. */
  readonly from?: string;
  readonly to?: string;
  /** On the line that stands for shard changes left out of the timeline: how many (each is in its shard's history). */
  readonly more?: number;
  readonly what: string;
}

export interface DatasetChanges extends PageDatasetHeader {
  /** The shards that changed, each whole: [shard number, shard]. */
  readonly shards: readonly (readonly [number, PageShard])[];
}

/** What a page applies to the view it holds to get the next one. */
export interface PageChanges {
  readonly at: number;
  /** Names appended to the node table, from index `from`. */
  readonly nodes?: { readonly from: number; readonly names: readonly string[] };
  readonly answeredBy?: ClusterView['answeredBy'];
  readonly singleton?: SingletonView | null;
  readonly members?: readonly PageMember[];
  readonly operations?: ClusterView['operations'];
  readonly problems?: ClusterView['problems'];
  /** Datasets whose shards are patched. */
  readonly datasets?: readonly DatasetChanges[];
  /** Datasets sent whole: new ones, and ones whose shards cannot be patched (their map just became available). */
  readonly full?: readonly PageDataset[];
  readonly removed?: readonly string[];
}

function pageShard(s: ShardView, table: StringTable): PageShard {
  // A copy's own error, when the view carries one (replicas fail one by one).
  const copies = s.owners.map((o): PageCopy => {
    const error = (o as { error?: unknown }).error;
    const base = [table.of(o.node), PLACEMENT_LETTERS[o.placement] ?? o.placement, STATUS_LETTERS[o.status]] as const;
    return typeof error === 'string' ? [...base, error] : base;
  });
  const detail: { p?: number; e?: string; r?: string } = {};
  if (s.progressPct !== undefined) detail.p = s.progressPct;
  if (s.error !== undefined) detail.e = s.error;
  if (s.reason !== undefined) detail.r = s.reason;
  return Object.keys(detail).length > 0 ? [STATUS_LETTERS[s.status], copies, detail] : [STATUS_LETTERS[s.status], copies];
}

/** The page's form of a cluster view; node names go through `table`. */
export function pageView(view: ClusterView, table: StringTable, at: number): PageView {
  for (const m of view.members) table.of(m.node);
  const datasets = view.datasets.map((d): PageDataset => {
    const shards = d.shards.map((s) => pageShard(s, table));
    const counts: Record<string, number> = {};
    for (const s of shards) counts[s[0]] = (counts[s[0]] ?? 0) + 1;
    return {
      name: d.name,
      numShards: d.numShards,
      replicationFactor: d.replicationFactor,
      minNumNodes: d.minNumNodes,
      strategy: d.strategy,
      epoch: d.epoch,
      version: d.version,
      counts,
      ...(d.mapUnavailable === undefined ? {} : { mapUnavailable: d.mapUnavailable }),
      shards,
    };
  });
  return {
    at,
    nodes: [...table.values],
    answeredBy: view.answeredBy,
    singleton: view.singleton,
    members: view.members.map(({ copies: _, ...m }) => m),
    operations: view.operations,
    problems: view.problems,
    datasets,
  };
}

const sameCopy = (a: PageCopy, b: PageCopy) => a[0] === b[0] && a[1] === b[1] && a[2] === b[2] && a[3] === b[3];
const sameDetail = (a: ShardDetail | undefined, b: ShardDetail | undefined) => a?.p === b?.p && a?.e === b?.e && a?.r === b?.r;

export function sameShard(a: PageShard, b: PageShard): boolean {
  return a[0] === b[0] && a[1].length === b[1].length && a[1].every((c, i) => sameCopy(c, b[1][i]!)) && sameDetail(a[2], b[2]);
}

const header = (d: PageDataset): PageDatasetHeader => ({
  name: d.name,
  epoch: d.epoch,
  version: d.version,
  counts: d.counts,
  ...(d.mapUnavailable === undefined ? {} : { mapUnavailable: d.mapUnavailable }),
});

const json = (v: unknown) => JSON.stringify(v);

/**
 * What changed from `prev` to `next`: the changes a page applies (undefined when nothing did) and
 * the events for the timeline and the shards' histories, in order.
 */
export function diffViews(prev: PageView, next: PageView): { readonly changes: PageChanges | undefined; readonly events: readonly TimelineEvent[] } {
  const at = next.at;
  const changes: { -readonly [K in keyof PageChanges]: PageChanges[K] } = { at };
  const events: TimelineEvent[] = [];
  if (next.nodes.length > prev.nodes.length) changes.nodes = { from: prev.nodes.length, names: next.nodes.slice(prev.nodes.length) };
  if (json(prev.answeredBy) !== json(next.answeredBy)) changes.answeredBy = next.answeredBy;
  if (json(prev.singleton) !== json(next.singleton)) {
    changes.singleton = next.singleton;
    events.push({ at, what: next.singleton ? `singleton on ${next.singleton.node} (epoch ${next.singleton.epoch})` : 'no singleton holds the lease' });
  }
  if (json(prev.members) !== json(next.members)) {
    changes.members = next.members;
    events.push(...memberEvents(prev.members, next.members, at));
  }
  if (json(prev.operations) !== json(next.operations)) {
    changes.operations = next.operations;
    events.push(...operationEvents(prev.operations, next.operations, at));
  }
  if (json(prev.problems) !== json(next.problems)) changes.problems = next.problems;

  const before = new Map(prev.datasets.map((d) => [d.name, d]));
  const patched: DatasetChanges[] = [];
  const full: PageDataset[] = [];
  for (const d of next.datasets) {
    const p = before.get(d.name);
    if (!p) {
      full.push(d);
      events.push({ at, dataset: d.name, what: `dataset ${d.name} set up: ${d.numShards} shards × ${d.replicationFactor}` });
      continue;
    }
    if (p.shards.length !== d.shards.length) {
      full.push(d);
      continue;
    }
    const shards: (readonly [number, PageShard])[] = [];
    for (let i = 0; i < d.shards.length; i++) {
      const a = p.shards[i]!;
      const b = d.shards[i]!;
      if (sameShard(a, b)) continue;
      shards.push([i, b]);
      const what = shardChange(a, b, next.nodes);
      if (what !== undefined) events.push({ at, dataset: d.name, shard: i, from: a[0], to: b[0], what });
    }
    if (shards.length > 0 || json(header(p)) !== json(header(d))) patched.push({ ...header(d), shards });
  }
  const names = new Set(next.datasets.map((d) => d.name));
  const removed = prev.datasets.filter((d) => !names.has(d.name)).map((d) => d.name);
  for (const name of removed) events.push({ at, dataset: name, what: `dataset ${name} removed` });
  if (patched.length > 0) changes.datasets = patched;
  if (full.length > 0) changes.full = full;
  if (removed.length > 0) changes.removed = removed;
  return { changes: Object.keys(changes).length > 1 ? changes : undefined, events };
}

/**
 * One shard's change in words ("n03: Active → Down; +n12 Initializing"), or undefined when only
 * its recovery progress moved (a step of progress is not an event; the shard shows it).
 */
function shardChange(a: PageShard, b: PageShard, nodes: readonly string[]): string | undefined {
  const parts: string[] = [];
  if (a[0] !== b[0]) parts.push(`${statusName(a[0])} → ${statusName(b[0])}`);
  const was = new Map(a[1].map((c) => [c[0], c]));
  const is = new Map(b[1].map((c) => [c[0], c]));
  const name = (i: number) => nodes[i] ?? `#${i}`;
  for (const [node, c] of is) {
    const o = was.get(node);
    if (!o) parts.push(`+${name(node)} ${placementName(c[1])} ${statusName(c[2])}`);
    else {
      const moved: string[] = [];
      if (o[1] !== c[1]) moved.push(`${placementName(o[1])} → ${placementName(c[1])}`);
      if (o[2] !== c[2]) moved.push(`${statusName(o[2])} → ${statusName(c[2])}`);
      if (moved.length > 0) parts.push(`${name(node)}: ${moved.join(', ')}`);
    }
  }
  for (const node of was.keys()) if (!is.has(node)) parts.push(`−${name(node)}`);
  if (a[2]?.e !== b[2]?.e && b[2]?.e !== undefined) parts.push(`error: ${b[2].e}`);
  return parts.length > 0 ? parts.join('; ') : undefined;
}

function memberEvents(prev: readonly PageMember[], next: readonly PageMember[], at: number): TimelineEvent[] {
  const key = (m: PageMember) => `${m.node}@${m.incarnation}`;
  const was = new Set(prev.map(key));
  const is = new Set(next.map(key));
  return [
    ...prev.filter((m) => !is.has(key(m))).map((m) => ({ at, what: `${m.node} left (incarnation ${m.incarnation})` })),
    ...next
      .filter((m) => !was.has(key(m)))
      .map((m) => ({ at, what: `${m.node} joined${m.rack === undefined ? '' : ` in rack ${m.rack}`} (incarnation ${m.incarnation})` })),
  ];
}

function operationEvents(prev: ClusterView['operations'], next: ClusterView['operations'], at: number): TimelineEvent[] {
  const was = new Set<string>(prev.draining);
  const is = new Set<string>(next.draining);
  const out: TimelineEvent[] = [];
  for (const n of is) if (!was.has(n)) out.push({ at, what: `${n} draining` });
  for (const n of was) if (!is.has(n)) out.push({ at, what: `${n} no longer draining` });
  const pair = (r: { old: string; new: string }) => `${r.old} → ${r.new}`;
  const replacing = new Set(prev.replacements.map(pair));
  for (const r of next.replacements) if (!replacing.has(pair(r))) out.push({ at, what: `replacing ${pair(r)}` });
  return out;
}
