// The test proxy's network faults (test/support/tcp-proxy.ts) against an echo server on 127.0.0.1:
// delays keep the order, a hold delivers everything on release, a reset closes open connections
// but not the listener, and a tag slows only its connections.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TcpProxy } from '../support/tcp-proxy.js';

let echo: net.Server;
let target: string;

beforeAll(async () => {
  echo = net.createServer((s) => {
    // The proxy resets its upstream connections too: a reset is expected here, not an error.
    s.on('error', () => undefined);
    s.pipe(s);
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  target = `127.0.0.1:${(echo.address() as net.AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => echo.close(() => resolve())));

/** A client of `port` that collects what it reads. */
async function client(port: number): Promise<{ socket: net.Socket; text: () => string; closed: Promise<void> }> {
  const socket = net.connect({ port, host: '127.0.0.1' });
  let got = '';
  socket.on('data', (b: Buffer) => (got += b.toString()));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return { socket, text: () => got, closed };
}

const waitFor = async (check: () => boolean, ms = 3_000) => {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('not in time');
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('TcpProxy', () => {
  it('a delay set on an open connection applies at once, in order, and ends when set back to 0', async () => {
    const proxy = await TcpProxy.start(target);
    const c = await client(proxy.port);
    c.socket.write('a');
    await waitFor(() => c.text() === 'a');
    proxy.delayMs = 150;
    const t0 = performance.now();
    c.socket.write('b');
    await new Promise((r) => setTimeout(r, 20));
    proxy.delayMs = 0;
    c.socket.write('c');
    await waitFor(() => c.text() === 'abc');
    // Both ways delayed for 'b'; 'c' did not overtake it.
    expect(performance.now() - t0).toBeGreaterThanOrEqual(140);
    c.socket.destroy();
    await proxy.close();
  });

  it('hold: nothing passes until release, then everything, in order', async () => {
    const proxy = await TcpProxy.start(target);
    const c = await client(proxy.port);
    proxy.hold();
    c.socket.write('x');
    c.socket.write('y');
    await new Promise((r) => setTimeout(r, 100));
    expect(c.text()).toBe('');
    proxy.release();
    await waitFor(() => c.text() === 'xy');
    c.socket.destroy();
    await proxy.close();
  });

  it('reset: open connections are closed, new ones are accepted', async () => {
    const proxy = await TcpProxy.start(target);
    const c = await client(proxy.port);
    proxy.reset();
    await c.closed;
    const d = await client(proxy.port);
    d.socket.write('again');
    await waitFor(() => d.text() === 'again');
    d.socket.destroy();
    await proxy.close();
  });

  it('a tag slows only the connections its first bytes name', async () => {
    const proxy = await TcpProxy.start(target, { tagOf: (first) => first.split(':')[0] });
    proxy.delayFor('slow', 200);
    const slow = await client(proxy.port);
    const fast = await client(proxy.port);
    const t0 = performance.now();
    slow.socket.write('slow:1');
    fast.socket.write('fast:1');
    await waitFor(() => fast.text() === 'fast:1');
    const fastMs = performance.now() - t0;
    await waitFor(() => slow.text() === 'slow:1');
    expect(fastMs).toBeLessThan(150);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
    slow.socket.destroy();
    fast.socket.destroy();
    await proxy.close();
  });

  it('drops the frames dropFrame picks and forwards the others whole', async () => {
    const proxy = await TcpProxy.start(target, { dropFrame: (f, toServer) => toServer && f.startsWith('drop') });
    const c = await client(proxy.port);
    c.socket.write('keep 1\ndro');
    c.socket.write('p 2\nkeep 3\n');
    await waitFor(() => c.text() === 'keep 1\nkeep 3\n');
    expect(proxy.frames.dropped).toBe(1);
    c.socket.destroy();
    await proxy.close();
  });
});
