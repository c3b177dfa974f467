// The fault schedules of the one-writer check (./one-writer-run.ts): the integration test's short
// fixed one and the benchmark's long random one, both made of the run's faults.
import { SLOW_LINK_MS, type OneWriterRun } from './one-writer-run.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const pick = <T>(xs: readonly T[], random: () => number): T | undefined => xs[Math.floor(random() * xs.length)];

/**
 * The test's schedule, about a minute of faults: a slow detector link of an owner (with a slow sink
 * call on another owner meanwhile), connection resets on the singleton's detector endpoint, the
 * singleton's Cassandra path blackholed, a node joining, a pause of an owner, an owner killed and
 * started again.
 */
export async function fixedSchedule(run: OneWriterRun, joiner: string): Promise<void> {
  const first = await run.rolesWhen((r) => r.owners.length > 0, 'an owner besides the singleton');
  const a = first.owners[0]!;
  const latency = run.slowDetectorLink(a, SLOW_LINK_MS, 15_000);
  await sleep(5_000);
  // Another writer than the slowed one if there is one (the singleton's node may be it).
  await run.slowSinkCall(first.writers.find((n) => n !== a) ?? a);
  await latency;
  let singleton = (await run.rolesWhen((r) => r.singleton !== undefined, 'a singleton')).singleton!;
  await run.resetDetector(singleton, 5, 1_000);
  await sleep(2_000);
  singleton = (await run.rolesWhen((r) => r.singleton !== undefined, 'a singleton')).singleton!;
  await run.blackholeCassandra(singleton, 5_000);
  run.inBackground(run.join(joiner));
  await sleep(3_000);
  const paused = (await run.rolesWhen((r) => r.owners.length > 0, 'an owner besides the singleton')).owners[0]!;
  await run.pause(paused, 2_000);
  await sleep(5_000);
  const { owners } = await run.rolesWhen((r) => r.owners.length > 0, 'an owner besides the singleton');
  const victim = owners.find((n) => n !== joiner) ?? owners[0]!;
  await run.kill(victim);
  await sleep(5_000);
  run.inBackground(run.join(victim));
  // Let the cluster work through the kill and the join under load.
  await sleep(10_000);
}

export interface RandomScheduleOptions {
  readonly durationMs: number;
  readonly random?: () => number;
  /** Most nodes down at once (killed or stopped), so that the dataset keeps its `minNumNodes`. */
  readonly maxDown?: number;
}

/** Counts of the faults a random schedule made, by kind. */
export type FaultCounts = Record<string, number>;

/**
 * Random faults until `durationMs` has passed, one after another with 1–6 s between them: a slow
 * detector link (300 ms, 5–20 s), a slow sink call, resets on the singleton's detector endpoint,
 * the singleton's Cassandra blackholed (2–8 s), a node stopped and joining again, the singleton's
 * host stopped gracefully (it hands the role over) and joining again, SIGSTOP of an owner or the
 * singleton (0.2–9 s), SIGKILL of an owner or of the singleton (started again 2–10 s later).
 */
export async function randomSchedule(run: OneWriterRun, o: RandomScheduleOptions): Promise<FaultCounts> {
  const random = o.random ?? Math.random;
  const maxDown = o.maxDown ?? 1;
  const counts: FaultCounts = {};
  const between = (lo: number, hi: number) => Math.round(lo + random() * (hi - lo));
  const deadline = performance.now() + o.durationMs;
  const down = () => run.options.nodes.filter((n) => !run.cluster.live().some((p) => p.name === n));
  const restartLater = (node: string) => run.inBackground(sleep(between(2_000, 10_000)).then(() => run.join(node)));
  while (performance.now() < deadline) {
    const r = await run.roles();
    const canLose = down().length < maxDown && r.members.length > 2;
    const kinds = [
      'slow-link',
      'slow-sink-call',
      'detector-resets',
      'cassandra-blackhole',
      'pause',
      ...(canLose ? ['kill-owner', 'kill-singleton', 'stop-and-join', 'handover'] : []),
    ];
    const kind = pick(kinds, random)!;
    const owner = pick(r.owners, random);
    let did = true;
    switch (kind) {
      case 'slow-link': {
        const node = pick(r.members, random);
        if (node) run.inBackground(run.slowDetectorLink(node, SLOW_LINK_MS, between(5_000, 20_000)));
        else did = false;
        break;
      }
      case 'slow-sink-call': {
        const node = pick(r.writers, random);
        if (node) await run.slowSinkCall(node);
        else did = false;
        break;
      }
      case 'detector-resets':
        if (r.singleton) run.inBackground(run.resetDetector(r.singleton, between(3, 10), between(500, 2_000)));
        else did = false;
        break;
      case 'cassandra-blackhole':
        if (r.singleton) run.inBackground(run.blackholeCassandra(r.singleton, between(2_000, 8_000)));
        else did = false;
        break;
      case 'pause': {
        const node = random() < 0.7 ? owner : r.singleton;
        if (node) run.inBackground(run.pause(node, between(200, 9_000)));
        else did = false;
        break;
      }
      case 'kill-owner':
      case 'kill-singleton': {
        const node = kind === 'kill-owner' ? owner : r.singleton;
        if (node) {
          await run.kill(node);
          restartLater(node);
        } else did = false;
        break;
      }
      case 'handover':
        // A graceful stop of the singleton's host: it hands the role over (ARCHITECTURE §11.9).
        if (r.singleton) {
          await run.stopGracefully(r.singleton);
          restartLater(r.singleton);
        } else did = false;
        break;
      case 'stop-and-join': {
        const node = pick(
          r.members.filter((n) => n !== r.singleton),
          random,
        );
        if (node) {
          await run.stopGracefully(node);
          restartLater(node);
        } else did = false;
        break;
      }
    }
    if (did) counts[kind] = (counts[kind] ?? 0) + 1;
    await sleep(between(1_000, 6_000));
  }
  // Every node that is down joins again before the end (after the restarts already planned).
  await run.settleFaults();
  for (const n of down()) run.inBackground(run.join(n));
  return counts;
}
