// An embedded cluster of four nodes over two racks on a simulated clock, quiet logs and short
// timeouts: the setting of the tests of replicas, planned moves and routing.
import { pino } from 'pino';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import type { CountingSink } from '../../src/ingest/counting-sink.js';

export function rackedCluster(prefix: string, sink: CountingSink): EmbeddedCluster {
  return new EmbeddedCluster({
    name: `${prefix}-${Math.floor(performance.now() * 1000)}`,
    clock: new SimulatedClock(0),
    nodes: [
      { name: 'n1', rack: 'rackA' },
      { name: 'n2', rack: 'rackB' },
      { name: 'n3', rack: 'rackA' },
      { name: 'n4', rack: 'rackB' },
    ],
    sink,
    log: pino({ level: 'silent' }),
    sessionTimeoutMs: 1_000,
    heartbeatIntervalMs: 250,
    settings: { publishIntervalMs: 1_000, recoveryReplyTimeoutMs: 500, pollIntervalMs: 250, reportResendMs: 500 },
  });
}
