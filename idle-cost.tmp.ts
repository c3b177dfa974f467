import { EmbeddedCluster } from './src/embedded/embedded-cluster.js';
const shards = Number(process.argv[2] ?? 16384);
const cluster = new EmbeddedCluster({ nodes: ['n1'], metrics: false, settings: { publishIntervalMs: 5000 } });
await cluster.start();
await new Promise((r) => setTimeout(r, 1000));
const t0 = performance.now();
const reply = await cluster.setupDataset({ ref: 'big', numShards: shards, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 0.001 } }, 60_000);
console.log('setup', reply.type, Math.round(performance.now() - t0), 'ms');
const node = cluster.nodes[0]!;
for (;;) {
  const running = await node.running();
  if (running.length === shards && running.every((r) => r.status.type === 'Active')) break;
  await new Promise((r) => setTimeout(r, 200));
}
console.log('all active after', Math.round(performance.now() - t0), 'ms');
await new Promise((r) => setTimeout(r, Number(process.env.SETTLE ?? 12_000)));
import { Session } from 'node:inspector/promises';
import { writeFileSync } from 'node:fs';
const session = new Session(); session.connect();
if (process.env.PROFILE) { await session.post('Profiler.enable'); await session.post('Profiler.start'); }
const v0 = (await node.singletonState())!.datasets.get('big' as never)!.mapper.version;
const h0 = node.actors!.handled;
const c0 = process.cpuUsage(); const w0 = performance.now();
await new Promise((r) => setTimeout(r, 10_000));
const c = process.cpuUsage(c0); const w = performance.now() - w0;
if (process.env.PROFILE) { const { profile } = await session.post('Profiler.stop'); writeFileSync('/tmp/idle.cpuprofile', JSON.stringify(profile)); }
console.log('versions', v0, (await node.singletonState())!.datasets.get('big' as never)!.mapper.version, 'messages', node.actors!.handled - h0, 'bus', JSON.stringify([...(cluster.bus as any).logs].map(([t, l]: any) => [t, l.base + l.records.length])));
console.log('idle cpu', ((c.user + c.system) / 1000 / w).toFixed(3), 'cores; rss', Math.round(process.memoryUsage().rss / 2**20), 'MiB');
await cluster.stop();
process.exit(0);
