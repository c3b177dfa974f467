// `npm start`: the embedded cluster on real time, the live view, then the story (or, with
// --no-story, the cluster until Ctrl-C), and a graceful stop whatever happened.
import type { Logger } from 'pino';
import { RealClock } from '../../cluster/clock.js';
import { startNodeApi, type NodeApi } from '../../http/node-api.js';
import { EXIT_USAGE, type DemoOptions } from '../options.js';
import { createDemoCluster, DEMO_TIMINGS, type DemoCluster } from './demo-cluster.js';
import { Screen, type ScreenOutput } from './screen.js';
import { ShardWatch } from './shard-watch.js';
import { bringUp, runStory, StoryFailure, type StoryContext, type StoryResult } from './story.js';
import { formatSummary } from './summary.js';
import { DemoInterrupted, realTimeline } from './timeline.js';
import { gatherView, renderView } from './view.js';

export interface DemoIO {
  readonly stdout: ScreenOutput;
  /** For a message that ends the demo before it starts (a port in use). */
  readonly stderr: (s: string) => void;
  /** Aborted on Ctrl-C. */
  readonly signal: AbortSignal;
  readonly log: Logger;
}

/** How long the story watches the poisoned shard stay put: two republish rounds. */
const HOLD_MS = 2 * DEMO_TIMINGS.settings.publishIntervalMs;

/** What the story must have shown; each problem is a reason to exit non-zero. */
export function storyProblems(r: StoryResult): string[] {
  const problems: string[] = [];
  const c = r.singletonKill;
  const epochs = Object.keys(c.epochBefore).map((ds) => c.epochAfter[ds]! - c.epochBefore[ds]!);
  if (epochs.some((d) => d !== 1)) problems.push(`the epoch went up by ${epochs.join('/')} after the singleton's kill, not by 1`);
  if (c.changed.length > 0) problems.push(`${c.changed.length} shards changed owner although their owner survived the singleton's kill`);
  if (c.datasetsBefore.join(',') !== c.datasetsAfter.join(',')) problems.push('the registered datasets changed across the failover');
  if (r.poison.owners.length !== 2 || r.poison.finalOwner !== undefined)
    problems.push(`the poisoned shard had owners [${r.poison.owners.join(', ')}], not exactly one move`);
  if (r.ledger.missing > 0) problems.push(`${r.ledger.missing} records were lost`);
  if (r.ledger.doubleOwned > 0) problems.push(`${r.ledger.doubleOwned} maps showed a shard with two owners`);
  if (r.ledger.runningOverlaps > 0) problems.push(`a shard was seen running on two live nodes at once ${r.ledger.runningOverlaps} times`);
  return problems;
}

/**
 * Newest member first, the singleton's node (the oldest) last, so the singleton never moves while
 * the cluster shuts down. (`EmbeddedCluster.stop` goes by the order nodes were added, which after a
 * restart is no longer the join order.)
 */
async function stopInJoinOrder(demo: DemoCluster): Promise<void> {
  const order = demo.cluster.membership.view().members.map((m) => m.node);
  const byAge = demo.cluster.nodes.filter((n) => n.state === 'running').sort((a, b) => order.indexOf(b.node) - order.indexOf(a.node));
  for (const n of byAge) await n.stop();
  await demo.cluster.stop();
}

async function stopCluster(demo: DemoCluster, screen: Screen): Promise<void> {
  const running = demo.cluster.nodes.filter((n) => n.state === 'running').length;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), 10_000);
  });
  const outcome = await Promise.race([stopInJoinOrder(demo).then(() => 'stopped' as const), timeout]);
  clearTimeout(timer);
  screen.print([
    outcome === 'stopped' ? `cluster stopped: ${running} running nodes left gracefully.` : 'the cluster did not stop within 10 s; exiting anyway.',
  ]);
}

export async function runDemo(options: DemoOptions, io: DemoIO): Promise<number> {
  const clock = new RealClock();
  const startedAt = clock.now();
  const shape = { nodes: options.nodes, datasets: options.datasets, shards: options.shards };
  const demo = createDemoCluster(shape, { clock, log: io.log });
  const watch = new ShardWatch(
    demo.cluster,
    demo.datasets.map((d) => d.ref),
    () => clock.now(),
  );
  let api: NodeApi | undefined;
  try {
    api = await startDemoApi(demo, watch, options, io.log);
  } catch (e) {
    if (!(e instanceof PortInUse)) throw e;
    watch.close();
    io.stderr(`shardherd: ${e.message}\n`);
    return EXIT_USAGE;
  }
  const nodeApis = api ? await startNodeEndpoints(demo, api.token.token, io.log) : [];
  const title = [
    `shardherd embedded cluster: ${shape.nodes} nodes, ${shape.datasets} dataset${shape.datasets > 1 ? 's' : ''} x ${shape.shards} shards`,
    ...(api ? [`status page ${api.url}/  API ${api.url}/api/v1  metrics ${api.url}/metrics  token ${api.token.token}`] : []),
    ...(nodeApis.length > 0 ? [`each node's own metrics: ${nodeApis.map((n) => `${n.name} ${n.api.url}/metrics`).join('  ')}`] : []),
  ].join('\n');
  const screen = new Screen(io.stdout, title, async () => {
    const elapsedMs = clock.now() - startedAt;
    return { elapsedMs, lines: renderView(await gatherView(demo, watch, elapsedMs)) };
  });
  const ctx: StoryContext = { demo, watch, timeline: realTimeline(clock, io.signal), narrator: screen };
  if (!screen.tty) screen.print([title]);
  screen.start();
  let code = 0;
  try {
    if (options.story) {
      const result = await runStory(ctx, { cooldownMs: DEMO_TIMINGS.settings.reassignmentCooldownMs, holdMs: HOLD_MS });
      await screen.stop();
      screen.print(formatSummary(result, startedAt));
      const problems = storyProblems(result);
      if (problems.length > 0) {
        screen.print(['', 'the story did not show what it should:', ...problems.map((p) => `  - ${p}`)]);
        code = 1;
      }
    } else {
      screen.step('the cluster runs; Ctrl-C stops it');
      await bringUp(ctx);
      screen.say('exploring: the cluster keeps running and ingesting until Ctrl-C.');
      for (;;) {
        await ctx.timeline.sleep(5_000);
        watch.ensureHost();
        await screen.snapshot();
      }
    }
  } catch (e) {
    await screen.stop();
    if (e instanceof DemoInterrupted) {
      screen.print(['', 'interrupted (Ctrl-C): stopping the cluster.']);
    } else if (e instanceof StoryFailure) {
      screen.print(['', `the story failed: ${e.message}`]);
      code = 1;
    } else {
      screen.print(['', `the demo failed: ${e instanceof Error ? e.message : String(e)}`]);
      io.log.error({ err: e }, 'demo failed');
      code = 1;
    }
  } finally {
    screen.restoreTerminal();
    watch.close();
    await api?.close();
    await Promise.all(nodeApis.map((n) => n.api.close()));
    await stopCluster(demo, screen);
  }
  return code;
}

/** The port `--port` named is taken: the demo does not start (exit 2). */
class PortInUse extends Error {}

/**
 * The status page and API of the demo, answered by a live node (the story kills and restarts
 * nodes; the subscribers' host survives the node kill). A busy default port falls back to a free
 * one, saying so (the URL printed is the one served); a busy `--port` is a `PortInUse`.
 */
async function startDemoApi(demo: DemoCluster, watch: ShardWatch, options: DemoOptions, log: Logger): Promise<NodeApi | undefined> {
  const { port } = options;
  if (port === undefined) return undefined;
  const nodeOf = () => watch.host ?? demo.cluster.anyRunning() ?? demo.cluster.nodes[0]!;
  const apiLog = log.child({ component: 'http' });
  try {
    return await startNodeApi(nodeOf, { port, log: apiLog });
  } catch (e) {
    if ((e as { code?: string }).code !== 'EADDRINUSE' || port === 0) throw e;
    if (options.portGiven) throw new PortInUse(`--port ${port} is in use by another process: name a free port, or --port 0 for any free one`);
    log.warn({ port }, `port ${port} is in use: the status page takes a free port`);
    return startNodeApi(nodeOf, { port: 0, log: apiLog });
  }
}

/**
 * Each node's own endpoint on a free port: its `/metrics` covers the shards that node runs (the
 * main endpoint follows whichever node hosts the page, so it covers one node at a time).
 */
async function startNodeEndpoints(demo: DemoCluster, token: string, log: Logger): Promise<{ name: string; api: NodeApi }[]> {
  const apiLog = log.child({ component: 'http' });
  return Promise.all(
    demo.cluster.nodes.map(async (n) => ({
      name: n.node as string,
      api: await startNodeApi(() => demo.cluster.node(n.node), { port: 0, token, log: apiLog }),
    })),
  );
}
