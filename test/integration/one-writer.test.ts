// One writer per RF 1 shard at a time, on real processes, whatever the network does
// (docs/ARCHITECTURE.md §11.7, §12): three `shardherd node` processes in `heartbeat` mode on the real
// Kafka and Cassandra (a fourth joins during the run), an 8-shard RF 1 dataset fed by a producer of
// numbered records, every sink call recorded by the `recorded` sink around a JSON-lines sink (which
// fences only its own process's writes, so two nodes writing at once both land and show), TCP
// proxies in front of each node's detector endpoint and Cassandra. About a minute of faults
// (test/support/one-writer-schedules.ts): 300 ms on an owner's detector link, a sink call slower than
// `sinkTimeoutMs`, connection resets on the singleton's detector endpoint, the singleton's
// Cassandra blackholed, a node joining, an owner paused 2 s, an owner killed and started again.
// Then the independent history checker over every node's calls and the producer's acknowledgements:
// no overlapping writes of a shard by two nodes, no write of an older token after a newer one, no
// acknowledged record lost; and, from the nodes' logs, no eviction of a live node that no fault
// explains (a pause of 2 s is survived; a killed node's incarnation is rightly evicted).
//
// SHARDHERD_ONE_WRITER_SINK=cassandra records around the Cassandra sink instead, which fences across
// processes: late writes are then refused, and the checker counts accepted writes only.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { rm } from 'node:fs/promises';
import { OneWriterRun } from '../support/one-writer-run.js';
import { fixedSchedule } from '../support/one-writer-schedules.js';
import { processClusterBase } from './support.js';

const NODES = ['node-1', 'node-2', 'node-3', 'node-4'];
const JOINER = 'node-4';

describe('one writer per RF 1 shard: real node processes under network faults, pauses and kills', () => {
  let run: OneWriterRun | undefined;
  let dir: string | undefined;
  let failed = false;

  beforeAll(async () => {
    const base = await processClusterBase('onewriter');
    dir = base.dir;
    const sink = process.env.SHARDHERD_ONE_WRITER_SINK === 'cassandra' ? 'cassandra' : 'jsonl';
    try {
      run = await OneWriterRun.start({ base: base.options, nodes: NODES, initial: 3, sink, log: (line) => process.stderr.write(`[one-writer] ${line}\n`) });
    } catch (e) {
      // The nodes' logs say why the cluster did not start: keep them.
      failed = true;
      throw e;
    }
  }, 150_000);

  afterEach((ctx) => {
    if (ctx.task.result?.state === 'fail') failed = true;
  });
  afterAll(async () => {
    await run?.stop();
    // The nodes' logs and histories explain a failure: keep them, and say where.
    if (failed && dir) process.stderr.write(`[one-writer] node configs, logs, sinks and histories kept in ${dir}\n`);
    else if (dir) await rm(dir, { recursive: true, force: true });
  }, 120_000);

  it('the history checker finds no overlapping writes, no write of an older token after a newer one, no lost acknowledged record; no live node is evicted', async () => {
    // A schedule cut short (no owner or singleton answered for a fault) still gets its history checked.
    let scheduleError: string | undefined;
    await fixedSchedule(run!, JOINER).catch((e: unknown) => (scheduleError = e instanceof Error ? e.message : String(e)));
    const result = await run!.finish(60_000, 45_000);
    process.stderr.write(`[one-writer] ${result.text.replaceAll('\n', '\n[one-writer] ')}\n`);
    const r = result.report;
    // The history is worth checking only if the nodes wrote under faults and the producer was acknowledged.
    expect(r.accepted, result.text).toBeGreaterThan(50);
    expect(r.acked, result.text).toBeGreaterThan(200);
    const findings = {
      overlaps: r.overlaps.length,
      outOfOrder: r.outOfOrder.length,
      lost: r.lost.length,
      falseEvictions: result.evictions.false.length,
      notConverged: result.notConverged,
      scheduleError,
    };
    expect(findings, `the checker's findings:\n${result.text}${scheduleError ? `\nthe schedule stopped early: ${scheduleError}` : ''}`).toEqual({
      overlaps: 0,
      outOfOrder: 0,
      lost: 0,
      falseEvictions: 0,
      notConverged: undefined,
      scheduleError: undefined,
    });
  }, 240_000);
});
