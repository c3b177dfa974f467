// The story's last step: count every record (produced by the source, ingested by the sink), and
// say in numbers what the story showed.
import type { PoisonTarget } from './demo-cluster.js';
import { endOffset } from './demo-cluster.js';
import type { StoryContext, StoryResult } from './story.js';

export interface DatasetLedger {
  readonly dataset: string;
  /** Records that exist at the time of the check: the sum of the shards' end offsets. */
  readonly produced: number;
  /** Of those, records the sink has (each counted once). */
  readonly ingested: number;
  /** Records below a healthy shard's end offset that the sink never got. */
  readonly missing: number;
  /** Records that wait behind the poison record (its shard is held in Error). */
  readonly held: number;
  /** Records ingested more than once (at-least-once delivery across handoffs). */
  readonly duplicates: number;
}

export interface Ledger {
  /** Cluster time of the check (the end offsets are read then). */
  readonly at: number;
  /** How long the healthy shards took to ingest every record below those end offsets. */
  readonly caughtUpMs: number;
  readonly datasets: readonly DatasetLedger[];
  readonly missing: number;
  readonly duplicates: number;
  readonly poisoned: (PoisonTarget & { readonly covered: number; readonly end: number }) | undefined;
  /** Maps the subscribers applied, each checked for a shard with more than one owner. */
  readonly mapsChecked: number;
  readonly doubleOwned: number;
  /** Samples of every live node's running shards, and shards seen running on two nodes at once. */
  readonly runningSamples: number;
  readonly runningOverlaps: number;
}

/**
 * Reads every shard's end offset, waits (up to `timeoutMs`) until the sink covers it on every
 * healthy shard, and counts. `poisoned` is the shard held in Error: it is expected to stop at its
 * poison record, and what waits behind it is reported as held, not missing.
 */
export async function takeLedger(ctx: StoryContext, poisoned: PoisonTarget | undefined, timeoutMs = 10_000): Promise<Ledger> {
  const { demo, timeline, watch } = ctx;
  const at = timeline.now();
  const ends = new Map<string, number>();
  for (const d of demo.datasets) {
    for (let s = 0; s < d.numShards; s++) ends.set(`${d.ref}/${s}`, await timeline.settle(endOffset(demo, d, s), 5_000, 'reading end offsets'));
  }
  const isPoisoned = (ds: string, s: number) => poisoned !== undefined && poisoned.dataset === ds && poisoned.shard === s;
  const behind = () =>
    demo.datasets.some((d) => {
      for (let s = 0; s < d.numShards; s++) if (!isPoisoned(d.ref, s) && demo.sink.tally(d.ref, s).covered < ends.get(`${d.ref}/${s}`)!) return true;
      return false;
    });
  while (behind() && timeline.now() - at < timeoutMs) {
    await timeline.sleep(100);
    await watch.sampleRunning();
  }
  const caughtUpMs = timeline.now() - at;
  const datasets = demo.datasets.map((d): DatasetLedger => {
    let produced = 0;
    let ingested = 0;
    let missing = 0;
    let held = 0;
    let duplicates = 0;
    for (let s = 0; s < d.numShards; s++) {
      const end = ends.get(`${d.ref}/${s}`)!;
      const t = demo.sink.tally(d.ref, s);
      produced += end;
      ingested += Math.min(t.covered, end) + [...t.ahead].filter((o) => o < end).length;
      if (isPoisoned(d.ref, s)) held += Math.max(0, end - t.covered);
      else missing += Math.max(0, end - t.covered);
      duplicates += t.duplicates;
    }
    return { dataset: d.ref, produced, ingested, missing, held, duplicates };
  });
  const p = poisoned
    ? { ...poisoned, covered: demo.sink.tally(poisoned.dataset, poisoned.shard).covered, end: ends.get(`${poisoned.dataset}/${poisoned.shard}`) ?? 0 }
    : undefined;
  return {
    at,
    caughtUpMs,
    datasets,
    missing: datasets.reduce((a, d) => a + d.missing, 0),
    duplicates: datasets.reduce((a, d) => a + d.duplicates, 0),
    poisoned: p,
    mapsChecked: watch.mapsChecked,
    doubleOwned: watch.doubleOwned.length,
    runningSamples: watch.runningSamples,
    runningOverlaps: watch.runningOverlaps.length,
  };
}

const n = (x: number) => x.toLocaleString('en-US');
export const plural = (count: number, word: string) => `${count.toLocaleString('en-US')} ${word}${count === 1 ? '' : 's'}`;
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

function table(rows: readonly (readonly string[])[]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('   '));
}

/** The summary, as lines; `startedAt` is the cluster time the demo began (for `t+` stamps). */
export function formatSummary(r: StoryResult, startedAt: number): string[] {
  const { nodeKill: b, singletonKill: c, poison: d, ledger: e } = r;
  const moved = Object.values(b.shards).reduce((a, s) => a + s.length, 0);
  const dests = [...new Set(Object.values(b.newOwners).flatMap((o) => Object.values(o)))].join(', ');
  const epochs = (rec: Readonly<Record<string, number>>) => [...new Set(Object.values(rec))].join('/');
  const survived = c.kept + c.changed.length;
  const lines: string[] = [];
  lines.push('', `Summary (the story took ${secs(r.durationMs)})`);
  lines.push(`  a. up: ${r.bringUp.singleton} hosted the singleton; every shard Active ${secs(r.bringUp.convergedMs)} after the first node started.`);
  lines.push(
    `  b. ${b.victim} killed: the cluster noticed after ${secs(b.detectedMs)}; its ${plural(moved, 'shard')} ${moved === 1 ? 'was' : 'were'} Active on ${dests} ${secs(b.convergedMs)} after the kill.`,
  );
  lines.push(
    `  c. singleton killed on ${c.oldSingleton}: ${c.newSingleton ?? '?'} took over, epoch ${epochs(c.epochBefore)} -> ${epochs(c.epochAfter)}, ${secs(c.takeoverMs)} after the kill; ` +
      `every shard Active after ${secs(c.convergedMs)}.`,
  );
  const sameDatasets = c.datasetsBefore.join(',') === c.datasetsAfter.join(',');
  lines.push(
    `     state kept: ${c.kept} of ${plural(survived, 'shard')} whose owner survived kept it` +
      `${c.movedFromKilled.length > 0 ? `, the ${plural(c.movedFromKilled.length, 'shard')} of ${c.oldSingleton} moved` : ''}; ` +
      `datasets ${sameDatasets ? `unchanged [${c.datasetsAfter.join(', ')}]` : `[${c.datasetsBefore.join(', ')}] -> [${c.datasetsAfter.join(', ')}]`}.`,
  );
  const key = `${d.dataset}/${d.shard}`;
  const movedOnce = d.owners.length === 2 && d.finalOwner === undefined && d.finalStatus.startsWith('Error');
  lines.push(
    `  d. ${key}: poison record at offset ${d.offset}; owners ${d.owners.join(' -> ')}` +
      (movedOnce
        ? ` (moved exactly once), then unassigned in Error for ${secs(d.heldMs)} without moving again, held by its cooldown (${secs(d.cooldownLeftMs)} left).`
        : ` — NOT the expected single move: now ${d.finalStatus}${d.finalOwner ? ` on ${d.finalOwner}` : ''}.`),
  );
  lines.push(`  e. records, counted at t+${secs(e.at - startedAt)} against each shard's end offset then (healthy shards caught up in ${secs(e.caughtUpMs)}):`);
  const rows = [['     dataset', 'produced', 'ingested', 'missing', 'held', 'ingested twice']];
  for (const x of e.datasets) rows.push([`     ${x.dataset}`, n(x.produced), n(x.ingested), n(x.missing), n(x.held), n(x.duplicates)]);
  lines.push(...table(rows));
  if (e.poisoned) {
    const p = e.poisoned;
    const waiting = Math.max(0, p.end - p.covered);
    lines.push(
      p.covered === p.offset
        ? `     ${key} stops at its poison record, offset ${p.offset}: the ${n(waiting)} records from there on are held in the source until the shard runs again after its cooldown.`
        : `     ${key} stops at offset ${p.covered}, before its poison record at ${p.offset}: the read that hit it (offsets ${p.covered}..${p.offset}) was refused whole, so the ${n(waiting)} records from ${p.covered} on are held in the source until the shard runs again after its cooldown.`,
    );
  }
  lines.push(
    e.missing === 0
      ? `     no record lost: 0 missing; every record below each shard's end offset was ingested${e.poisoned ? `, except those held behind the poison record in ${key}` : ''}.`
      : `     ${n(e.missing)} records LOST: below their shard's end offset and never ingested.`,
  );
  lines.push(`     ${plural(e.duplicates, 'record')} ingested twice during handoffs (at-least-once: a new owner replays from the last checkpoint).`);
  lines.push(
    e.doubleOwned === 0
      ? `     no map ever showed a shard with two owners (${n(e.mapsChecked)} maps checked as the subscribers applied them).`
      : `     ${n(e.doubleOwned)} times a map showed a shard with two owners (of ${n(e.mapsChecked)} maps checked).`,
  );
  lines.push(
    e.runningOverlaps === 0
      ? `     no shard was seen running on two live nodes at once (${n(e.runningSamples)} samples of every node's running shards, taken every 0.1 s while the story waited on the cluster).`
      : `     ${n(e.runningOverlaps)} times a shard was seen running on two live nodes at once (in ${n(e.runningSamples)} samples).`,
  );
  return lines;
}
