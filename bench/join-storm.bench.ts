/**
 * Many node processes joining one cluster at once, on real Kafka and Cassandra: `SHARDHERD_JOIN_NODES`
 * (default 50) `shardherd node` processes of the built package with small heaps
 * (`--max-old-space-size=96`), in 3 racks, with one balanced dataset of 256 shards × RF 3 set up
 * once the first three (one per rack) are up, then the others in waves started together. Measured: the time until every node is a member (in
 * every node's view), until the map is balanced (every node holds ⌊q⌋ or ⌈q⌉ copies) with every
 * copy Active; how often a member flapped (left the view, or fenced itself) before the end; the
 * largest resident memory of a node.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { everyCopyActive, ProcessCluster } from '../test/support/process-cluster.js';
import { ms, register, type Table } from './harness.js';
import { sleep } from './runtime-support.js';
import { withRealServices } from './real-services.js';

const COUNT = Number(process.env.SHARDHERD_JOIN_NODES ?? 50);
const SHARDS = 256;
const RF = 3;
const DATASET = 'metrics';
const SESSION_MS = 10_000;
const WAVE = Number(process.env.SHARDHERD_JOIN_WAVE ?? 10);

register({
  name: 'join-storm',
  run: async (): Promise<Table> =>
    withRealServices(async (s) => {
      execFileSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' });
      const dir = await mkdtemp(join(tmpdir(), 'shardherd-join-'));
      const name = `join_${Date.now().toString(36)}`;
      const names = Array.from({ length: COUNT }, (_, i) => `node-${String(i + 1).padStart(2, '0')}`);
      const racks = ['a', 'b', 'c'];
      const cluster = new ProcessCluster({
        dir,
        cluster: name,
        ...s, // the real Kafka and Cassandra
        keyspace: 'shardherd_bench',
        sessionTimeoutMs: SESSION_MS,
        runtime: { publishIntervalMs: 5_000, pollIntervalMs: 200 },
        rackOf: (n) => racks[names.indexOf(n) % 3]!,
        built: true,
        nodeFlags: ['--max-old-space-size=96'],
      });
      try {
        const t0 = Date.now();
        // One node per rack first: three copies need three racks before the dataset is set up.
        for (const n of names.slice(0, 3)) await cluster.start(n, 120_000);
        const setup = await fetch(`${cluster.get(names[0]!).url}/api/v1/datasets`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${cluster.token(names[0]!)}` },
          body: JSON.stringify({
            ref: DATASET,
            numShards: SHARDS,
            minNumNodes: 1,
            replicationFactor: RF,
            strategy: 'balanced',
            source: { type: 'synthetic', recordsPerSecond: 0.001 },
          }),
        });
        if (setup.status !== 201) throw new Error(`setup answered ${setup.status}`);
        const started = Date.now();
        // The others in waves of WAVE, each started together: 47 processes starting at once on 2
        // cores starve each other's event loops past the session timeout (their startup alone is
        // about a CPU second each), and a starved member is rightly dropped.
        for (let i = 3; i < names.length; i += WAVE) await Promise.all(names.slice(i, i + WAVE).map((n) => cluster.start(n, 300_000)));
        const processesUp = Date.now() - started;
        let allMembersMs = 0;
        let balancedMs = 0;
        const q = (SHARDS * RF) / COUNT;
        for (const deadline = Date.now() + 600_000; Date.now() < deadline; await sleep(500)) {
          const statuses = await Promise.all(names.map((n) => cluster.status(n, 10_000)));
          if (!allMembersMs && statuses.every((st) => st?.member)) allMembersMs = Date.now() - started;
          if (!allMembersMs) continue;
          const loads = statuses.map((st) => (st ? (st.runningCounts[DATASET]?.Active ?? 0) : -1));
          if (loads.every((l) => l === Math.floor(q) || l === Math.ceil(q)) && (await everyCopyActive(cluster, DATASET, SHARDS * RF))) {
            balancedMs = Date.now() - started;
            break;
          }
        }
        if (!balancedMs) throw new Error('the map was not balanced within 10 minutes');
        let flaps = 0;
        let maxRss = 0;
        for (const n of names) {
          const log = await readFile(join(dir, `${n}.log`), 'utf8');
          flaps += (log.match(/"event":"(node\.fenced|membership\.fenced)"/g) ?? []).length;
          const pid = cluster.get(n).child.pid!;
          const status = await readFile(`/proc/${pid}/status`, 'utf8');
          maxRss = Math.max(maxRss, Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024);
        }
        const singletonLog = await Promise.all(names.map((n) => readFile(join(dir, `${n}.log`), 'utf8')));
        const downs = singletonLog.reduce((k, l) => k + (l.match(/"event":"member\.down"/g) ?? []).length, 0);
        return {
          title: `${COUNT} node processes joining one cluster at once (real Kafka and Cassandra), a balanced dataset of ${SHARDS} shards × RF ${RF}`,
          columns: ['measure', 'value'],
          rows: [
            [`every process up (status endpoint), from the start of the other ${COUNT - 3}`, ms(processesUp)],
            ['every node a member in its own view', ms(allMembersMs)],
            [`map balanced (${Math.floor(q)} or ${Math.ceil(q)} copies a node), every copy Active`, ms(balancedMs)],
            ['members that fenced themselves (flaps)', flaps],
            ['member.down decisions logged by singletons', downs],
            ['largest resident memory of a node', `${maxRss.toFixed(0)} MiB`],
            ["from the first node's start", ms(Date.now() - t0)],
          ],
          notes: [
            `Built package (\`node dist/cli/main.js node\`), \`--max-old-space-size=96\`, session timeout ${SESSION_MS} ms, racks a/b/c in turn; the first three, then waves of ${WAVE} started together (\`SHARDHERD_JOIN_WAVE\`).`,
          ],
        };
      } finally {
        await cluster.stopAll();
        // SHARDHERD_BENCH_KEEP=1 keeps the nodes' configs and logs, to read what happened.
        if (process.env.SHARDHERD_BENCH_KEEP === '1') process.stderr.write(`[join-storm] logs kept in ${dir}\n`);
        else await rm(dir, { recursive: true, force: true });
      }
    }),
});
