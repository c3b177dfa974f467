// The failure detector's TCP transport (docs/ARCHITECTURE.md §11.3) on 127.0.0.1 against real
// processes: a SIGKILLed peer's connection ends at once and a new probe is refused (the strong
// signal), a SIGSTOPped peer is judged by the probe timeout (the kernel still accepts its
// connections), and bad frames are dropped, counted by cause and never acted on.
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { MonotonicClock } from '../../src/cluster/clock.js';
import { DroppedFrames } from '../../src/cluster/failure-detector/dropped.js';
import { DetectorEndpoint } from '../../src/cluster/failure-detector/endpoint.js';
import { FrameReader } from '../../src/cluster/failure-detector/frame-reader.js';
import { DETECTOR_FORMAT, encodeFrame, MAX_FRAME_BYTES, type DetectorMessage, type MemberRef } from '../../src/cluster/failure-detector/messages.js';
import { Prober } from '../../src/cluster/failure-detector/prober.js';
import { parseAddress, TcpDetectorTransport } from '../../src/cluster/failure-detector/tcp-transport.js';
import type { LinkEnd } from '../../src/cluster/failure-detector/transport.js';
import { incarnation, nodeId } from '../../src/core/ids.js';

const PEER = new URL('../support/detector-peer.ts', import.meta.url).pathname;
const SETTINGS = { heartbeatIntervalMs: 100 }; // probes wait 200 ms
const me = { node: nodeId('observer'), incarnation: incarnation('observer-1') };
const cleanup: (() => unknown)[] = [];

afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** A peer process; resolves once it listens, with its address and identity. */
async function startPeer(name = 'peer'): Promise<{ child: ChildProcess; address: string; self: MemberRef }> {
  const child = spawn(process.execPath, ['--import', 'tsx', PEER], {
    env: { ...process.env, DETECTOR_PEER_CLUSTER: 'test', DETECTOR_PEER_NODE: name },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  cleanup.push(() => {
    child.kill('SIGCONT');
    child.kill('SIGKILL');
  });
  const first = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`the peer exited with ${code} before it listened`)));
  });
  const { address, self } = JSON.parse(first) as { address: string; self: MemberRef };
  return { child, address, self };
}

function observer(cluster = 'test') {
  const dropped = new DroppedFrames();
  const transport = new TcpDetectorTransport({ cluster, dropped });
  const prober = new Prober({ transport, self: me, cluster, clock: new MonotonicClock(), settings: SETTINGS, dropped });
  cleanup.push(async () => {
    prober.close();
    await transport.close();
  });
  return { dropped, transport, prober };
}

const timed = async <T>(p: Promise<T>): Promise<{ value: T; ms: number }> => {
  const start = performance.now();
  const value = await p;
  return { value, ms: performance.now() - start };
};

describe('FrameReader', () => {
  it('cuts frames at newlines across chunks, a character split between chunks included', () => {
    const reader = new FrameReader();
    const bytes = Buffer.from('{"a":"é"}\n{"b":1}\n{"c"', 'utf8');
    const split = bytes.indexOf(0xa9); // the second byte of é
    expect(reader.push(bytes.subarray(0, split))).toEqual([]);
    expect(reader.push(bytes.subarray(split))).toEqual([
      { kind: 'frame', text: '{"a":"é"}' },
      { kind: 'frame', text: '{"b":1}' },
    ]);
    expect(reader.push(Buffer.from(':2}\n'))).toEqual([{ kind: 'frame', text: '{"c":2}' }]);
  });

  it('gives up once, on a frame that grows past the limit without a newline', () => {
    const reader = new FrameReader();
    expect(reader.push(Buffer.alloc(MAX_FRAME_BYTES - 1, 'x'))).toEqual([]);
    expect(reader.push(Buffer.from('x'))).toEqual([{ kind: 'too-large', bytes: MAX_FRAME_BYTES }]);
    expect(reader.push(Buffer.from('\n{}\n'))).toEqual([]);
  });
});

describe('parseAddress', () => {
  it('reads host:port and [v6]:port, and refuses anything else', () => {
    expect(parseAddress('127.0.0.1:7100')).toEqual({ host: '127.0.0.1', port: 7100 });
    expect(parseAddress('[::1]:80')).toEqual({ host: '::1', port: 80 });
    expect(parseAddress('node-3.internal:0')).toEqual({ host: 'node-3.internal', port: 0 });
    for (const bad of ['7100', 'host:', 'host:99999', '::1:80', 'a b:1']) expect(() => parseAddress(bad), bad).toThrow(RangeError);
  });
});

// Each test starts real peer processes: on a loaded machine that alone can take seconds.
describe('TCP detector transport against real processes', { timeout: 30_000 }, () => {
  it('is answered by a live peer, directly and through a helper', async () => {
    const [a, b] = await Promise.all([startPeer('a'), startPeer('b')]);
    const { prober } = observer();
    expect(await prober.probe(a.address, a.self)).toEqual({ kind: 'acked' });
    // b probes a for us: a is alive.
    expect(await prober.ask(b.address, b.self, a.self, a.address, 1)).toBe('alive');
  });

  it('sees a SIGKILLed peer at once: its connection ends closed, and the next probe is refused', async () => {
    const peer = await startPeer();
    const { transport, prober } = observer();
    let ended: { why: LinkEnd; at: number } | undefined;
    const link = transport.connect(peer.address, { message: () => {}, ended: (why) => (ended = { why, at: performance.now() }) });
    expect(await prober.probe(peer.address, peer.self)).toEqual({ kind: 'acked' }); // connected and answering
    expect(link.open).toBe(true);
    const killedAt = performance.now();
    peer.child.kill('SIGKILL');
    for (let i = 0; i < 100 && !ended; i++) await new Promise((r) => setTimeout(r, 5));
    expect(ended?.why).toBe('closed');
    expect(ended!.at - killedAt).toBeLessThan(500); // milliseconds in practice: the kernel closes the socket
    const next = await timed(prober.probe(peer.address, peer.self));
    expect(next.value).toEqual({ kind: 'refused' });
    expect(next.ms).toBeLessThan(150); // refused, not timed out (the probe timeout is 200 ms)
  });

  it('judges a SIGSTOPped peer by the probe timeout: it accepts connections but does not answer', async () => {
    const peer = await startPeer();
    const { transport, prober } = observer();
    expect(await prober.probe(peer.address, peer.self)).toEqual({ kind: 'acked' });
    peer.child.kill('SIGSTOP');
    const silent = await timed(prober.probe(peer.address, peer.self));
    expect(silent.value).toMatchObject({ kind: 'timed-out' });
    expect(silent.ms).toBeGreaterThanOrEqual(195);
    // A fresh connection to the stopped process is accepted by its kernel: no refusal, only silence.
    let ended: LinkEnd | undefined;
    const fresh = transport.connect(peer.address, { message: () => {}, ended: (why) => (ended = why) });
    await new Promise((r) => setTimeout(r, 100));
    expect(fresh.open).toBe(true);
    expect(ended).toBeUndefined();
    fresh.close();
    peer.child.kill('SIGCONT');
    expect(await prober.probe(peer.address, peer.self)).toEqual({ kind: 'acked' });
  });

  it('reports a helper that is gone as no vote, and a target that is gone as refused through the helper', async () => {
    const [a, b] = await Promise.all([startPeer('a'), startPeer('b')]);
    const { prober } = observer();
    a.child.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 50));
    expect(await prober.ask(b.address, b.self, a.self, a.address, 1)).toBe('refused');
    expect(await prober.ask(a.address, a.self, b.self, b.address, 1)).toBeUndefined();
  });
});

describe('TCP detector transport with bad frames', () => {
  async function endpoint() {
    const dropped = new DroppedFrames();
    const first: string[] = [];
    const counting = new DroppedFrames(
      (d) => first.push(d.cause),
      (cause) => dropped.drop({ cause, detail: '' }),
    );
    const transport = new TcpDetectorTransport({ cluster: 'test', dropped: counting });
    const self = { node: nodeId('ep'), incarnation: incarnation('ep-1') };
    const prober = new Prober({ transport, self, cluster: 'test', clock: new MonotonicClock(), settings: SETTINGS, dropped: counting });
    const ep = new DetectorEndpoint({ transport, self, cluster: 'test', prober, settings: SETTINGS, dropped: counting });
    const address = await ep.start();
    cleanup.push(async () => {
      prober.close();
      await transport.close();
    });
    return { address, self, dropped: counting, first };
  }

  /** A raw socket to `address` that collects the lines it receives. */
  async function raw(address: string): Promise<{ socket: Socket; lines: string[]; closed: () => boolean }> {
    const { host, port } = parseAddress(address);
    const socket = connect({ host, port });
    cleanup.push(() => socket.destroy());
    const lines: string[] = [];
    let closed = false;
    socket.on('close', () => (closed = true));
    createInterface({ input: socket }).on('line', (l) => lines.push(l));
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    return { socket, lines, closed: () => closed };
  }

  const ping = (to: MemberRef, seq: number, cluster = 'test'): DetectorMessage => ({ format: DETECTOR_FORMAT, cluster, type: 'ping', from: me, to, seq });

  it('drops malformed, foreign and misaddressed frames (counted, reported once per cause) and answers the good ones', async () => {
    const ep = await endpoint();
    const peer = await raw(ep.address);
    peer.socket.write('not json\n');
    peer.socket.write('{"format":1}\n');
    peer.socket.write(encodeFrame(ping(ep.self, 1, 'other-cluster')));
    peer.socket.write(encodeFrame(ping({ node: ep.self.node, incarnation: incarnation('ep-0') }, 2)));
    peer.socket.write(encodeFrame({ format: DETECTOR_FORMAT, cluster: 'test', type: 'heartbeat', from: me, to: ep.self, seq: 3 }));
    peer.socket.write(
      encodeFrame({ format: DETECTOR_FORMAT, cluster: 'test', type: 'grant', from: me, to: ep.self, seq: 4, epoch: 1, leaseMs: 500, heartbeatIntervalMs: 100 }),
    );
    peer.socket.write(encodeFrame(ping(ep.self, 5)));
    for (let i = 0; i < 100 && peer.lines.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
    // Only the good ping was answered, and nothing else went back.
    await new Promise((r) => setTimeout(r, 50));
    expect(peer.lines.map((l) => JSON.parse(l) as DetectorMessage).map((m) => `${m.type} ${m.seq}`)).toEqual(['ack 5']);
    expect(Object.fromEntries([...ep.dropped.byCause].filter(([, n]) => n > 0))).toEqual({
      malformed: 2,
      'foreign-cluster': 1,
      'wrong-addressee': 1,
      'not-singleton': 1,
      replayed: 1,
    });
    expect(ep.first).toEqual(['malformed', 'foreign-cluster', 'wrong-addressee', 'not-singleton', 'replayed']);
    expect(peer.closed()).toBe(false);
  });

  it('closes a connection that sends a frame past the limit', async () => {
    const ep = await endpoint();
    const peer = await raw(ep.address);
    peer.socket.write('x'.repeat(MAX_FRAME_BYTES + 10));
    for (let i = 0; i < 100 && !peer.closed(); i++) await new Promise((r) => setTimeout(r, 5));
    expect(peer.closed()).toBe(true);
    expect(ep.dropped.byCause.get('too-large')).toBe(1);
  });
});

describe('the advertised address', () => {
  it('is the bound port unless an advertised port is given (the endpoint behind a proxy or a NAT)', async () => {
    const plain = new TcpDetectorTransport({ cluster: 'test', dropped: new DroppedFrames() });
    const proxied = new TcpDetectorTransport({ cluster: 'test', advertisedHost: 'node-1.internal', advertisedPort: 17_100, dropped: new DroppedFrames() });
    cleanup.push(
      () => plain.close(),
      () => proxied.close(),
    );
    const accept = () => ({ message: () => {}, ended: () => {} });
    expect(parseAddress(await plain.listen(accept))).toEqual({ host: '127.0.0.1', port: expect.any(Number) as number });
    expect(await proxied.listen(accept)).toBe('node-1.internal:17100');
  });
});
