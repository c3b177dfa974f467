// An embedded cluster on real time with short timeouts and quiet logs: the setting of the tests
// that talk to a node over HTTP (the API, the metrics, the web page in a browser).
import { pino } from 'pino';
import { EmbeddedCluster, type EmbeddedClusterOptions } from '../../src/embedded/embedded-cluster.js';

export function liveCluster(
  prefix: string,
  nodes: NonNullable<EmbeddedClusterOptions['nodes']>,
  options: Pick<EmbeddedClusterOptions, 'source'> = {},
): EmbeddedCluster {
  return new EmbeddedCluster({
    name: `${prefix}-${Date.now()}`,
    nodes,
    log: pino({ level: 'silent' }),
    sessionTimeoutMs: 1_500,
    heartbeatIntervalMs: 250,
    settings: { publishIntervalMs: 500, recoveryReplyTimeoutMs: 500, pollIntervalMs: 50, reportResendMs: 500 },
    ...options,
  });
}
