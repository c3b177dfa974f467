/**
 * `npm run bench -- one-writer`: the one-writer check of test/integration/one-writer.test.ts for
 * longer, with random faults (the same code: test/support/one-writer-run.ts and
 * one-writer-schedules.ts): four `shardherd node` processes (built package) in `heartbeat` mode
 * on real Kafka and Cassandra (three at first, the fourth joins), an 8-shard RF 1 dataset fed by a
 * producer of numbered records, every sink call recorded. Faults one after another, 1–6 s apart: 300 ms on a node's detector link for 5–20 s, a
 * sink call slower than `sinkTimeoutMs`, connection resets on the singleton's detector endpoint,
 * the singleton's Cassandra path blackholed for 2–8 s, SIGSTOP of an owner or the singleton for
 * 0.2–9 s, SIGKILL of an owner or of the singleton, a graceful stop (of the singleton's host too:
 * its handover); a node down starts again
 * 2–10 s later (a new incarnation, a join), at most two down at once. At the end: convergence, then
 * the history checker over every node's calls and the producer's acknowledgements.
 *
 * Environment: SHARDHERD_ONE_WRITER_MINUTES (default 30) of faults; SHARDHERD_ONE_WRITER_BUSY=1
 * adds two processes spinning a core each; SHARDHERD_ONE_WRITER_SINK=cassandra records around the
 * Cassandra sink (fenced across processes) instead of the JSON-lines one (fenced per process).
 * Kafka and Cassandra: see bench/real-services.ts.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { violations } from '../test/support/history-checker.js';
import { OneWriterRun } from '../test/support/one-writer-run.js';
import { randomSchedule } from '../test/support/one-writer-schedules.js';
import { busyCores } from './disturbances.js';
import { register, type Table } from './harness.js';
import { withRealServices } from './real-services.js';
import { sleep } from './runtime-support.js';

const NODES = ['node-1', 'node-2', 'node-3', 'node-4'];
const log = (line: string) => process.stderr.write(`[one-writer] ${line}\n`);

function settings(): { minutes: number; busy: boolean; sink: 'jsonl' | 'cassandra' } {
  const minutes = Number(process.env.SHARDHERD_ONE_WRITER_MINUTES ?? 30);
  if (!(minutes > 0)) throw new Error(`SHARDHERD_ONE_WRITER_MINUTES must be a positive number, got ${process.env.SHARDHERD_ONE_WRITER_MINUTES}`);
  const sink = process.env.SHARDHERD_ONE_WRITER_SINK ?? 'jsonl';
  if (sink !== 'jsonl' && sink !== 'cassandra') throw new Error(`SHARDHERD_ONE_WRITER_SINK must be jsonl or cassandra, got ${sink}`);
  return { minutes, busy: process.env.SHARDHERD_ONE_WRITER_BUSY === '1', sink };
}

async function oneWriter(): Promise<Table> {
  const o = settings();
  // Interrupted: exit through the exit hooks, which SIGKILL the node processes and the JVMs this run started.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));
  // The node processes run the built package: build it, so they run these sources.
  execFileSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' });
  const loadBefore = os.loadavg();
  return withRealServices(async (s) => {
    const dir = await mkdtemp(join(os.tmpdir(), 'shardherd-one-writer-'));
    const base = {
      dir,
      cluster: `ow_${Date.now().toString(36)}`,
      kafkaBrokers: s.kafkaBrokers,
      cassandraContactPoints: s.cassandraContactPoints,
      cassandraLocalDataCenter: s.cassandraLocalDataCenter,
      keyspace: 'shardherd_bench',
    };
    const run = await OneWriterRun.start({ base, nodes: NODES, initial: 3, built: true, sink: o.sink, log });
    const busy = o.busy ? [busyCores(1), busyCores(1)] : [];
    let kept = false;
    try {
      const t0 = performance.now();
      run.inBackground(sleep(10_000).then(() => run.join('node-4')));
      const counts = await randomSchedule(run, { durationMs: o.minutes * 60_000, maxDown: 2 });
      const faultMinutes = (performance.now() - t0) / 60_000;
      for (const b of busy) await b.stop();
      const result = await run.finish(300_000, 120_000);
      const r = result.report;
      kept = violations(r) > 0 || result.notConverged !== undefined || result.evictions.false.length > 0;
      log(result.text.replaceAll('\n', '\n[one-writer] '));
      const loadAfter = os.loadavg();
      const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(', ');
      return {
        title: `One writer per RF 1 shard: ${NODES.length} node processes, heartbeat mode, random faults for ${o.minutes} min${o.busy ? ', two busy-loop processes' : ''}, recorded around the ${o.sink} sink`,
        columns: [
          'minutes of faults',
          'faults',
          'sink calls (accepted / refused / failed)',
          'overlapping writes',
          'out-of-order writes',
          'lost acknowledged records',
          'evictions (false)',
          'converged',
        ],
        rows: [
          [
            faultMinutes.toFixed(1),
            Object.entries(counts)
              .map(([k, n]) => `${k} × ${n}`)
              .join(', ') || '-',
            `${r.calls} (${r.accepted} / ${r.refused} / ${r.failed})`,
            `${r.overlaps.length}${r.overlaps.length ? ` on ${new Set(r.overlaps.map((x) => x.shard)).size} shards, longest ${Math.max(...r.overlaps.map((x) => x.overlapMs)).toFixed(0)} ms` : ''}`,
            r.outOfOrder.length,
            `${r.lost.length} of ${r.acked}`,
            `${result.evictions.total} (${result.evictions.false.length})`,
            result.notConverged === undefined ? 'yes' : `no: ${result.notConverged}`,
          ],
        ],
        notes: [
          `Machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? '?'}); load average (1, 5, 15 min) ${load(loadBefore)} before, ${load(loadAfter)} after.`,
          'Overlapping writes: accepted sink calls of one shard by two nodes whose [start, end] intervals overlap (wall clock, every process on this machine). Out-of-order: an accepted call whose token is older than that of an accepted call that had ended before it started. Lost: acknowledged by the broker, in no accepted call.',
          "Evictions: `detector.evicted` in the nodes' logs; false: of an incarnation still running that no fault explains (not stopped by a SIGSTOP within the 5 s before, not killed or stopped since its last start).",
          ...(kept ? [`Configs, logs and histories kept in ${dir}.`] : []),
          ...result.text.split('\n').slice(0, 60),
        ],
      };
    } finally {
      for (const b of busy) await b.stop().catch(() => undefined);
      await run.stop();
      if (!kept) await rm(dir, { recursive: true, force: true });
    }
  }, {});
}

register({ name: 'one-writer', onDemand: true, run: oneWriter });
