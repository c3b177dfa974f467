// A node's /status names its actors whose handler has run 10 s or more (the messages behind one
// wait, the node's own answers included), logs each stall once, and forgets it once it ends.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { nodeStatus } from '../../src/http/node-status.js';
import { SimDriver } from '../../src/sim/driver.js';

describe("a node's stalled actors", () => {
  it('are shown on /status from 10 s on, logged once each, and gone once the handler ends', async () => {
    const lines: { event?: string; actor?: string; message?: string }[] = [];
    const clock = new SimulatedClock(0);
    const cluster = new EmbeddedCluster({
      clock,
      nodes: ['n1'],
      log: pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) }),
    });
    const driver = new SimDriver(cluster);
    await cluster.startNodes();
    await driver.advance(500);
    const n1 = cluster.node('n1');
    const runtime = n1.actors!;
    // An actor of the node's system whose handler waits on a call that does not return.
    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    const slow = runtime.spawn<number, { readonly type: 'Write' }>(
      runtime.system,
      'slow-store-writer',
      async (n) => {
        await held;
        return n + 1;
      },
      { initialState: 0 },
    );
    runtime.send(slow, { type: 'Write' });
    const status = () => driver.whenSettled(nodeStatus(n1));
    await driver.advance(9_000);
    expect((await status()).stalled).toBeUndefined();
    await driver.advance(2_000);
    const shown = (await status()).stalled;
    expect(shown).toEqual([{ actor: expect.stringContaining('slow-store-writer'), message: 'Write', forMs: expect.any(Number) }]);
    expect(shown![0]!.forMs).toBeGreaterThanOrEqual(10_000);
    await status();
    await status();
    expect(lines.filter((l) => l.event === 'actor.stalled')).toHaveLength(1);
    release();
    await driver.advance(100);
    expect((await status()).stalled).toBeUndefined();
    await cluster.stop();
  });
});
