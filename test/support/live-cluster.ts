// An embedded cluster with short timeouts and quiet logs: the setting of the tests that talk to a
// node over HTTP (the API, the metrics, the web page in a browser). On simulated time with its
// driver for the tests of what the cluster does; on real time where a real browser watches it.
import { pino } from 'pino';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { EmbeddedCluster, type EmbeddedClusterOptions } from '../../src/embedded/embedded-cluster.js';
import { SimDriver } from '../../src/sim/driver.js';

type Nodes = NonNullable<EmbeddedClusterOptions['nodes']>;
type Extra = Pick<EmbeddedClusterOptions, 'source'>;

const options = (name: string, nodes: Nodes, extra: Extra): EmbeddedClusterOptions => ({
  name,
  nodes,
  log: pino({ level: 'silent' }),
  sessionTimeoutMs: 1_500,
  heartbeatIntervalMs: 250,
  settings: { publishIntervalMs: 500, recoveryReplyTimeoutMs: 500, pollIntervalMs: 50, reportResendMs: 500 },
  ...extra,
});

/** On the wall clock: for a real browser, which sees the cluster move in real time. */
export function liveCluster(prefix: string, nodes: Nodes, extra: Extra = {}): EmbeddedCluster {
  return new EmbeddedCluster(options(`${prefix}-${Date.now()}`, nodes, extra));
}

/** On simulated time: nothing happens until the driver moves the clock (`advance`, `whenSettled`). */
export function simulatedCluster(prefix: string, nodes: Nodes, extra: Extra = {}): { cluster: EmbeddedCluster; driver: SimDriver } {
  const cluster = new EmbeddedCluster({ ...options(prefix, nodes, extra), clock: new SimulatedClock(0) });
  return { cluster, driver: new SimDriver(cluster) };
}
