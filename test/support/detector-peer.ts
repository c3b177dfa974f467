// A failure detector endpoint in a process of its own, for tests that kill or stop a real process:
// it listens on 127.0.0.1, answers pings and probes for whoever asks, prints its address as one JSON
// line on stdout, and runs until it is killed.
import { DroppedFrames } from '../../src/cluster/failure-detector/dropped.js';
import { DetectorEndpoint } from '../../src/cluster/failure-detector/endpoint.js';
import { Prober } from '../../src/cluster/failure-detector/prober.js';
import { TcpDetectorTransport } from '../../src/cluster/failure-detector/tcp-transport.js';
import { MonotonicClock } from '../../src/cluster/clock.js';
import { incarnation, nodeId } from '../../src/core/ids.js';

const cluster = process.env.DETECTOR_PEER_CLUSTER ?? 'test';
const self = {
  node: nodeId(process.env.DETECTOR_PEER_NODE ?? 'peer'),
  incarnation: incarnation(process.env.DETECTOR_PEER_INCARNATION ?? `peer-${process.pid}`),
};
const dropped = new DroppedFrames();
const transport = new TcpDetectorTransport({ cluster, dropped });
const settings = { heartbeatIntervalMs: 100 };
const prober = new Prober({ transport, self, cluster, clock: new MonotonicClock(), settings, dropped });
const endpoint = new DetectorEndpoint({ transport, self, cluster, prober, settings, dropped });
const address = await endpoint.start();
process.stdout.write(`${JSON.stringify({ address, self })}\n`);
// Keep the process alive: the endpoint's server is its only handle and it is ref'd.
