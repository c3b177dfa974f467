// Waiting for the cluster: the story's one test of health is "every shard Active on a live node",
// checked from the subscribers' maps, with a timeout and a message that says what is still wrong.
import type { DemoCluster } from './demo-cluster.js';
import type { ShardWatch } from './shard-watch.js';
import type { StoryContext } from './story.js';
import { ranges } from './view.js';

/** A step did not reach the state it waits for in time: the message says what is still wrong. */
export class StoryFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StoryFailure';
  }
}

/** How often a wait looks at the maps again. */
export const POLL_MS = 100;
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

export function live(demo: DemoCluster, name: string | undefined): boolean {
  const n = name === undefined ? undefined : demo.cluster.nodes.find((x) => x.node === name);
  return n !== undefined && n.state === 'running' && n.isMember;
}

/** Every shard Active on a live node, except the shards in `exempt` (`dataset/shard`). */
export function converged(demo: DemoCluster, watch: ShardWatch, exempt: ReadonlySet<string> = new Set()): boolean {
  return demo.datasets.every((d) => {
    const map = watch.map(d.ref);
    if (!map) return false;
    for (let s = 0; s < map.numShards; s++) {
      if (exempt.has(`${d.ref}/${s}`)) continue;
      if (map.statusForShard(s).type !== 'Active' || !live(demo, map.nodeForShard(s))) return false;
    }
    return true;
  });
}

/** What keeps the maps from converging, for a failure message. */
function whatIsWrong(demo: DemoCluster, watch: ShardWatch, exempt: ReadonlySet<string>): string {
  const problems: string[] = [];
  for (const d of demo.datasets) {
    const map = watch.map(d.ref);
    if (!map) {
      problems.push(`${d.ref}: the subscriber has no map yet`);
      continue;
    }
    const bad = new Map<string, number[]>();
    for (let s = 0; s < map.numShards; s++) {
      if (exempt.has(`${d.ref}/${s}`)) continue;
      const status = map.statusForShard(s).type;
      const owner = map.nodeForShard(s);
      if (status === 'Active' && live(demo, owner)) continue;
      const why =
        owner === undefined ? `${status}, no owner` : live(demo, owner) ? `${status} on ${owner}` : `${status} on ${owner}, which is not a live member`;
      bad.set(why, [...(bad.get(why) ?? []), s]);
    }
    for (const [why, shards] of bad) problems.push(`${d.ref} shards ${ranges(shards)}: ${why}`);
  }
  return problems.join('; ') || 'nothing (it converged just now)';
}

/** Waits until `done`, re-hosting the subscribers and sampling what nodes run on every look; returns how long it took. */
export async function waitFor(ctx: StoryContext, done: () => boolean | Promise<boolean>, timeoutMs: number, failure: () => string): Promise<number> {
  const start = ctx.timeline.now();
  for (;;) {
    ctx.watch.ensureHost();
    await ctx.watch.sampleRunning();
    if (await done()) return ctx.timeline.now() - start;
    if (ctx.timeline.now() - start >= timeoutMs) throw new StoryFailure(failure());
    await ctx.timeline.sleep(POLL_MS);
  }
}

/** Waits until every shard but `exempt` is Active on a live node; fails saying what is still wrong. */
export function waitConverged(ctx: StoryContext, what: string, exempt: ReadonlySet<string> = new Set()): Promise<number> {
  const timeout = ctx.convergeTimeoutMs ?? 20_000;
  return waitFor(
    ctx,
    () => converged(ctx.demo, ctx.watch, exempt),
    timeout,
    () => `${what}: the shard maps did not converge within ${secs(timeout)}: ${whatIsWrong(ctx.demo, ctx.watch, exempt)}`,
  );
}
