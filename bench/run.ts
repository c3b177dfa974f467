/**
 * `npm run bench [-- <filter>]`: prints the machine's figures, then runs every registered benchmark
 * whose name contains <filter> (case-insensitive), one markdown table each.
 *
 * Each benchmark runs in a fresh Node process (same flags, so tsx still applies): V8's optimised
 * code depends on what ran before, and that alone moved some figures by 2×. A benchmark's figures
 * are thus the same whether it runs alone (filtered) or with the others.
 *
 * The soak (`npm run bench -- soak`, SHARDHERD_SOAK_MINUTES, default 10) runs only when named, as
 * does the one-writer check (`npm run bench -- one-writer`, SHARDHERD_ONE_WRITER_MINUTES, default 30).
 * A filter that is a benchmark's exact name runs that one alone (`failover`, not `deploy-failover`
 * too); arguments after the filter go to the benchmark's process (`npm run bench -- failover
 * --kills 3`).
 *
 * To add a benchmark: write bench/<topic>.bench.ts calling `register(...)`, and import it below.
 */
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { markdownTable, registered } from './harness.js';
import { skipKafkajsNegativeTimeouts } from '../src/cli/process-warnings.js';

// kafkajs's negative timer, reported by Node 24 once per broker connection (src/cli/process-warnings.ts).
skipKafkajsNegativeTimeouts();

import './strategy.bench.js';
import './singleton-recovery.bench.js';
import './node-crash.bench.js';
import './fanout.bench.js';
import './deploy-failover.bench.js';
import './deploy-throughput.bench.js';
import './deploy-produce.bench.js';
import './deploy-joins.bench.js';
import './deploy-latency.bench.js';
import './map-format.bench.js';
import './placement.bench.js';
import './placement-operations.bench.js';
import './scale.bench.js';
import './scale-embedded.bench.js';
import './join-storm.bench.js';
import './join-wave.bench.js';
import './every-copy.bench.js';
import './soak.bench.js';
import './routed-requests.bench.js';
import './import-time.bench.js';
import './read-availability.bench.js';
import './failover.bench.js';
import './slow-store.bench.js';
import './one-writer.bench.js';
import './large-dataset.bench.js';
import './copy-memory.bench.js';
import './placement-load.bench.js';
import './deploy-load-moves.bench.js';

const CHILD = 'SHARDHERD_BENCH_ONLY';
const only = process.env[CHILD];

if (only !== undefined) {
  const b = registered().find((x) => x.name === only);
  if (!b) throw new Error(`no benchmark named ${only}`);
  const t0 = performance.now();
  console.log(markdownTable(await b.run()));
  console.log(`\n_${b.name}: ${((performance.now() - t0) / 1000).toFixed(1)} s_\n`);
} else {
  const filter = (process.argv[2] ?? '').toLowerCase();
  const exact = registered().filter((b) => b.name.toLowerCase() === filter);
  const selected = exact.length > 0 ? exact : registered().filter((b) => b.name.toLowerCase().includes(filter) && (filter !== '' || !b.onDemand));
  const cpus = os.cpus();
  const gib = (bytes: number): string => `${(bytes / 2 ** 30).toFixed(1)} GiB`;
  console.log('## Machine\n');
  console.log(`- Node: ${process.version} (${os.platform()} ${os.arch()})`);
  console.log(`- CPU: ${cpus[0]?.model ?? 'unknown'} × ${cpus.length} cores`);
  console.log(`- Memory: ${gib(os.totalmem())} total, ${gib(os.freemem())} free`);
  console.log(
    `- Load average (1, 5, 15 min): ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(', ')}`,
  );
  console.log(`- Benchmarks: ${selected.map((b) => b.name).join(', ') || `none match "${filter}"`}\n`);

  const start = performance.now();
  for (const b of selected) {
    const child = spawnSync(process.execPath, [...process.execArgv, process.argv[1]!, ...process.argv.slice(3)], {
      stdio: 'inherit',
      env: { ...process.env, [CHILD]: b.name },
    });
    if (child.status !== 0) process.exitCode = 1;
  }
  console.log(`Total: ${((performance.now() - start) / 1000).toFixed(1)} s`);
  if (selected.length === 0) process.exitCode = 1;
}
