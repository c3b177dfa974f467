// The in-process detector transport (embedded mode, the simulator) on a simulated clock: it must
// behave as TCP does where the detector can tell — a dead endpoint is refused and its connections
// end closed, a paused one accepts and queues, a direction delivers in order — and it carries the
// simulator's faults: loss, delay, and partitions one direction at a time.
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { Gate } from '../../src/actors/gate.js';
import { DroppedFrames } from '../../src/cluster/failure-detector/dropped.js';
import { DetectorEndpoint } from '../../src/cluster/failure-detector/endpoint.js';
import { MemoryDetectorNetwork, type MemoryDetectorNetworkOptions } from '../../src/cluster/failure-detector/memory-transport.js';
import { DETECTOR_FORMAT, type DetectorMessage, type MemberRef } from '../../src/cluster/failure-detector/messages.js';
import { Prober } from '../../src/cluster/failure-detector/prober.js';
import type { LinkEnd } from '../../src/cluster/failure-detector/transport.js';
import { incarnation, nodeId } from '../../src/core/ids.js';

const SETTINGS = { heartbeatIntervalMs: 100 };
const ref = (n: string): MemberRef => ({ node: nodeId(n), incarnation: incarnation(`${n}-1`) });
const turns = async (n = 20) => {
  for (let i = 0; i < n; i++) await new Promise<void>((r) => setImmediate(r));
};

async function setup(options: MemoryDetectorNetworkOptions = {}) {
  const clock = new SimulatedClock(0);
  const network = new MemoryDetectorNetwork(clock, { cluster: 'sim', ...options });
  const advance = async (ms: number) => {
    const end = clock.now() + ms;
    while (clock.now() < end) {
      clock.advance(Math.min(1, end - clock.now()));
      await turns(3);
    }
  };
  /** A node: an endpoint that answers pings, a prober, and its process's gate. */
  const node = async (name: string) => {
    const gate = new Gate();
    const transport = network.transport(gate);
    const self = ref(name);
    const dropped = new DroppedFrames();
    const prober = new Prober({ transport, self, cluster: 'sim', clock, settings: SETTINGS, dropped });
    const endpoint = new DetectorEndpoint({ transport, self, cluster: 'sim', prober, settings: SETTINGS, dropped });
    const address = await endpoint.start();
    return { gate, transport, self, prober, address, dropped };
  };
  return { clock, network, advance, node };
}

/** Starts a probe and lets simulated time pass until it ended. */
async function probe(env: Awaited<ReturnType<typeof setup>>, from: { prober: Prober }, to: { address: string; self: MemberRef }) {
  const start = env.clock.now();
  let outcome: unknown;
  void from.prober.probe(to.address, to.self).then((o) => (outcome = o));
  for (let i = 0; i < 1000 && outcome === undefined; i++) await env.advance(1);
  return { outcome, ms: env.clock.now() - start };
}

describe('MemoryDetectorTransport', () => {
  it('answers a probe of a live node within the round trip', async () => {
    const env = await setup();
    const [a, b] = [await env.node('a'), await env.node('b')];
    const r = await probe(env, a, b);
    expect(r.outcome).toEqual({ kind: 'acked' });
    expect(r.ms).toBeLessThanOrEqual(5); // connect, ping, ack: 1 ms each way
  });

  it('refuses a connect to an address nobody listens at, and to a dead node; a dead node’s connections end closed', async () => {
    const env = await setup();
    const [a, b] = [await env.node('a'), await env.node('b')];
    let ended: LinkEnd | undefined;
    env.network.transport().connect('mem-404', { message: () => {}, ended: (why) => (ended = why) });
    await env.advance(5);
    expect(ended).toBe('refused');

    expect((await probe(env, a, b)).outcome).toEqual({ kind: 'acked' });
    let bEnded: LinkEnd | undefined;
    a.transport.connect(b.address, { message: () => {}, ended: (why) => (bEnded = why) });
    await env.advance(5);
    b.gate.kill();
    b.transport.kill();
    await env.advance(2);
    expect(bEnded).toBe('closed');
    expect((await probe(env, a, b)).outcome).toEqual({ kind: 'refused' });
  });

  it('lets a paused node accept connections and queue what it is sent: it answers when it runs again', async () => {
    const env = await setup();
    const [a, b] = [await env.node('a'), await env.node('b')];
    b.gate.pause();
    const r = await probe(env, a, b);
    expect(r.outcome).toMatchObject({ kind: 'timed-out' });
    expect(r.ms).toBe(200);
    let late: unknown;
    void a.prober.probe(b.address, b.self).then((o) => (late = o));
    await env.advance(50);
    b.gate.resume();
    await env.advance(5);
    expect(late).toEqual({ kind: 'acked' });
  });

  it('cuts one direction at a time: a connect through a cut times out, a message across it is lost', async () => {
    const cut = new Set<string>();
    const env = await setup({ reachable: (from, to) => !cut.has(`${from}>${to}`), connectTimeoutMs: 300 });
    const [a, b] = [await env.node('a'), await env.node('b')];
    cut.add(`${b.address}>${a.address}`); // b's answers never reach a
    let ended: LinkEnd | undefined;
    a.transport.connect(b.address, { message: () => {}, ended: (why) => (ended = why) });
    await env.advance(400);
    expect(ended).toBe('timeout');
    expect((await probe(env, a, b)).outcome).toMatchObject({ kind: 'timed-out' });
    // Healed: once the connect under way has timed out, a new one goes through.
    cut.clear();
    await env.advance(300);
    expect((await probe(env, a, b)).outcome).toEqual({ kind: 'acked' });
  });

  it('lets a live endpoint refuse connects and reset connections for a while (the simulator’s resets): both ends hear closed', async () => {
    const refusing = new Set<string>();
    const env = await setup({
      refuses: (from, to) => refusing.has(`${from}>${to}`),
      faults: (from, to) => (refusing.has(`${from}>${to}`) ? { kind: 'reset' } : { kind: 'deliver' }),
    });
    const [a, b] = [await env.node('a'), await env.node('b')];
    let aEnded: LinkEnd | undefined;
    const link = a.transport.connect(b.address, { message: () => {}, ended: (why) => (aEnded = why) });
    await env.advance(5);
    refusing.add(`${a.address}>${b.address}`);
    // A message on the open connection resets it: lost, and a's end hears closed though b runs.
    link.send({ format: DETECTOR_FORMAT, cluster: 'sim', kind: 'ping', seq: 1, from: a.self, to: b.self } as unknown as DetectorMessage);
    await env.advance(5);
    expect(aEnded).toBe('closed');
    // A connect is refused meanwhile, as a dead process's would be.
    expect((await probe(env, a, b)).outcome).toEqual({ kind: 'refused' });
    refusing.clear();
    expect((await probe(env, a, b)).outcome).toEqual({ kind: 'acked' });
  });

  it('survives a lost ping: the probe pings again at a third of its timeout', async () => {
    let first = true;
    const env = await setup({
      faults: (_from, _to, m) => {
        const drop = first && m.type === 'ping';
        if (drop) first = false;
        return drop ? { kind: 'drop' } : { kind: 'deliver' };
      },
    });
    const [a, b] = [await env.node('a'), await env.node('b')];
    const r = await probe(env, a, b);
    expect(r.outcome).toEqual({ kind: 'acked' });
    expect(r.ms).toBeGreaterThanOrEqual(66);
    expect(r.ms).toBeLessThan(100);
  });

  it('drops and delays messages as the faults say, and never reorders a direction', async () => {
    const fate: ('drop' | number)[] = [];
    const env = await setup({
      faults: () => {
        const f = fate.shift();
        return f === undefined ? { kind: 'deliver' } : f === 'drop' ? { kind: 'drop' } : { kind: 'delay', ms: f };
      },
    });
    const b = await env.node('b');
    const got: number[] = [];
    const client = env.network.transport();
    const link = client.connect(b.address, { message: (m) => got.push(m.seq), ended: () => {} });
    await env.advance(3);
    // b answers pings with acks: 1 is delayed 50 ms, 2 dropped, 3 on time (but after 1).
    fate.push(50, 'drop');
    const ping = (seq: number): DetectorMessage => ({ format: DETECTOR_FORMAT, cluster: 'sim', type: 'ping', from: ref('x'), to: b.self, seq });
    link.send(ping(1));
    link.send(ping(2));
    link.send(ping(3));
    await env.advance(100);
    expect(got).toEqual([1, 3]);
  });
});
