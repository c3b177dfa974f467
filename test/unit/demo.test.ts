// `npm start`: its command line, and the whole scripted story run on a simulated clock — the same
// code `npm start` runs on real time — checked for what a person watching would notice.
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { createDemoCluster, DEMO_TIMINGS, type DemoCluster } from '../../src/cli/demo/demo-cluster.js';
import { storyProblems } from '../../src/cli/demo/run.js';
import { Screen, wrap, type Narrator } from '../../src/cli/demo/screen.js';
import { ShardWatch } from '../../src/cli/demo/shard-watch.js';
import { bringUp, converged, runStory, type StoryResult } from '../../src/cli/demo/story.js';
import { formatSummary } from '../../src/cli/demo/summary.js';
import { simTimeline } from '../../src/cli/demo/timeline.js';
import { gatherView, ranges, renderView } from '../../src/cli/demo/view.js';
import { EXIT_USAGE, parseCommandLine } from '../../src/cli/options.js';
import { SimDriver } from '../../src/sim/driver.js';

describe('shardherd command line', () => {
  const run = (argv: string[]) => {
    const r = parseCommandLine(argv);
    if (r.kind !== 'run') throw new Error(`expected options, got ${JSON.stringify(r)}`);
    return r.options;
  };
  const fails = (argv: string[]) => {
    const r = parseCommandLine(argv);
    if (r.kind !== 'exit') throw new Error(`expected a usage error for ${argv.join(' ')}`);
    expect(r.code).toBe(EXIT_USAGE);
    expect(r.stderr).not.toMatch(/\n\s+at /); // a message, no stack trace
    return r.stderr;
  };

  it('defaults to the story with 5 nodes, 2 datasets, 16 shards and warn logs', () => {
    expect(run([])).toEqual({ nodes: 5, datasets: 2, shards: 16, story: true, logLevel: 'warn', port: 8080, portGiven: false });
  });

  it('takes every flag', () => {
    expect(run(['--nodes', '3', '--datasets', '1', '--shards', '8'])).toEqual({
      nodes: 3,
      datasets: 1,
      shards: 8,
      story: true,
      logLevel: 'warn',
      port: 8080,
      portGiven: false,
    });
    expect(run(['--no-story', '--log-level', 'debug', '--datasets=4', '--shards=64', '--port', '0'])).toEqual({
      nodes: 5,
      datasets: 4,
      shards: 64,
      story: false,
      logLevel: 'debug',
      port: 0,
      portGiven: true,
    });
    expect(run(['--port', '8080'])).toMatchObject({ port: 8080, portGiven: true });
    expect(run(['--no-http'])).toMatchObject({ port: undefined, portGiven: false });
    expect(fails(['--port', '70000'])).toContain('--port must be between 0 and 65535');
  });

  it('refuses a shard count that is not a power of two, saying so', () => {
    const msg = fails(['--shards', '12']);
    expect(msg).toContain('--shards must be a power of two');
    expect(msg).toContain('try 8 or 16');
  });

  it('refuses out-of-range and malformed numbers, unknown flags and stray arguments', () => {
    expect(fails(['--nodes', '2'])).toContain('--nodes must be between 3 and 32');
    expect(fails(['--datasets', '5'])).toContain('--datasets must be between 1 and 4');
    expect(fails(['--datasets', '0'])).toContain('--datasets must be between 1 and 4');
    expect(fails(['--shards', 'abc'])).toContain('--shards must be a whole number');
    expect(fails(['--nodes', '3.5'])).toContain('--nodes must be a whole number');
    expect(fails(['--log-level', 'loud'])).toContain('Allowed choices are');
    expect(fails(['--speed', '2'])).toContain("unknown option '--speed'");
    expect(fails(['--bogus'])).toContain("unknown option '--bogus'");
    expect(fails(['now'])).toContain('too many arguments');
  });

  it('prints help on stdout and exits 0', () => {
    const r = parseCommandLine(['--help']);
    expect(r).toMatchObject({ kind: 'exit', code: 0 });
    if (r.kind === 'exit') expect(r.stdout).toContain('--no-story');
  });
});

describe('the story on a simulated clock', () => {
  const shape = { nodes: 5, datasets: 2, shards: 16 };
  const lines: string[] = [];
  const narrator: Narrator = {
    step: (t) => void lines.push(t),
    say: (l) => void lines.push(`  ${l}`),
    snapshot: async () => {},
  };
  let demo: DemoCluster;
  let watch: ShardWatch;
  let driver: SimDriver;
  let result: StoryResult;
  let wallMs = 0;

  beforeAll(async () => {
    const started = performance.now();
    const clock = new SimulatedClock(0);
    demo = createDemoCluster(shape, { clock, log: pino({ level: 'silent' }) });
    driver = new SimDriver(demo.cluster);
    watch = new ShardWatch(
      demo.cluster,
      demo.datasets.map((d) => d.ref),
      () => clock.now(),
    );
    result = await runStory(
      { demo, watch, timeline: simTimeline(driver), narrator },
      { cooldownMs: DEMO_TIMINGS.settings.reassignmentCooldownMs, holdMs: 4_000 },
    );
    wallMs = performance.now() - started;
  }, 30_000);

  afterAll(async () => {
    watch?.close();
    const stopping = demo?.cluster.stop();
    if (stopping) await simTimeline(driver).settle(stopping, 10_000, 'stopping the cluster');
  });

  it('runs in a few seconds of wall time', () => {
    expect(wallMs).toBeLessThan(10_000);
    expect(lines[0]).toBe('a. the cluster comes up and ingests');
  });

  it("a killed node's shards end Active on other nodes", () => {
    const b = result.nodeKill;
    expect(b.victim).not.toBe(result.bringUp.singleton);
    const moved = Object.entries(b.shards).flatMap(([ds, shards]) => shards.map((s) => ({ ds, s, owner: b.newOwners[ds]![s] })));
    expect(moved.length).toBeGreaterThan(0);
    for (const m of moved) {
      expect(m.owner).toBeDefined();
      expect(m.owner).not.toBe(b.victim);
    }
    // They went Active on their new owners (the subscribers saw it).
    for (const m of moved) {
      expect(watch.changes.some((c) => c.dataset === m.ds && c.shard === m.s && c.owner === m.owner && c.status === 'Active')).toBe(true);
    }
    // Restarted, it came back as a spare: nothing moves back to it.
    expect(lines.filter((l) => l.includes('joins as a spare and gets no shard'))).toHaveLength(2);
    // Noticed after the session timeout, not before.
    expect(b.detectedMs).toBeGreaterThanOrEqual(DEMO_TIMINGS.sessionTimeoutMs - DEMO_TIMINGS.heartbeatIntervalMs);
    expect(b.convergedMs).toBeLessThan(10_000);
  });

  it("after the singleton's kill the epoch went up by one and the maps were kept", () => {
    const c = result.singletonKill;
    expect(c.oldSingleton).toBe(result.bringUp.singleton);
    expect(c.newSingleton).toBeDefined();
    expect(c.newSingleton).not.toBe(c.oldSingleton);
    for (const ds of ['metrics', 'logs']) expect(c.epochAfter[ds]).toBe(c.epochBefore[ds]! + 1);
    expect(c.changed).toEqual([]);
    expect(c.kept).toBeGreaterThan(0);
    expect(c.kept + c.movedFromKilled.length).toBe(shape.datasets * shape.shards);
    expect(c.datasetsBefore).toEqual(['logs', 'metrics']);
    expect(c.datasetsAfter).toEqual(c.datasetsBefore);
    for (const m of c.movedFromKilled) expect(m.to).not.toBe(c.oldSingleton);
  });

  it('the poisoned shard moved exactly once, then stayed unassigned in Error', () => {
    const d = result.poison;
    expect(d.owners).toHaveLength(2);
    expect(d.owners[0]).not.toBe(d.owners[1]);
    expect(d.finalOwner).toBeUndefined();
    expect(d.finalStatus).toBe(`Error(poison record at offset ${d.offset})`);
    expect(d.heldMs).toBeGreaterThanOrEqual(4_000);
    expect(d.cooldownLeftMs).toBeGreaterThan(50_000);
    // Still so now, and every other shard Active on a live node.
    const record = watch.map(d.dataset)!.recordForShard(d.shard);
    expect(record.status.type).toBe('Error');
    expect(record.assignments).toHaveLength(0);
    expect(converged(demo, watch, new Set([`${d.dataset}/${d.shard}`]))).toBe(true);
  });

  it('the summary reports zero lost records, the poisoned shard stopping at its poison record', () => {
    const e = result.ledger;
    expect(e.missing).toBe(0);
    expect(e.doubleOwned).toBe(0);
    expect(e.runningOverlaps).toBe(0);
    expect(e.runningSamples).toBeGreaterThan(10);
    expect(e.mapsChecked).toBeGreaterThan(0);
    expect(e.poisoned?.covered).toBe(result.poison.offset);
    for (const x of e.datasets) {
      expect(x.produced).toBeGreaterThan(0);
      expect(x.ingested + x.held).toBe(x.produced);
    }
    const text = formatSummary(result, 0).join('\n');
    expect(text).toContain('no record lost: 0 missing');
    expect(text).toContain(`stops at its poison record, offset ${result.poison.offset}`);
    expect(text).toContain('no map ever showed a shard with two owners');
    expect(text).toContain('(moved exactly once)');
    expect(storyProblems(result)).toEqual([]);
  });

  it('the live view draws every dataset with its grid, owners and stamp', async () => {
    const lines = renderView(await gatherView(demo, watch, 1_000));
    const text = lines.join('\n');
    expect(text).toMatch(/metrics +16 shards +epoch 2 \/ version \d+ +ingested [\d,]+ records/);
    const poisoned = Array.from({ length: 16 }, (_, s) => (s === result.poison.shard ? 'E' : 'A')).join('');
    const healthy = 'A'.repeat(16);
    const row = (letters: string) => `    0: ${letters.replace(/(.{4})(?=.)/g, '$1 ')}`;
    expect(lines).toContain(`  ${row(poisoned)}`); // metrics
    expect(lines).toContain(`  ${row(healthy)}`); // logs
    expect(text).toMatch(/\* singleton: node-\d \(epoch 2\)/);
    expect(lines.filter((l) => l.includes('owners')).length).toBe(2);
  });
});

describe('the subscribers of the live view', () => {
  it('subscribe again from another node when theirs is killed', async () => {
    const clock = new SimulatedClock(0);
    const demo = createDemoCluster({ nodes: 4, datasets: 1, shards: 8 }, { clock, log: pino({ level: 'silent' }) });
    const driver = new SimDriver(demo.cluster);
    const timeline = simTimeline(driver);
    const watch = new ShardWatch(
      demo.cluster,
      demo.datasets.map((d) => d.ref),
      () => clock.now(),
    );
    const narrator: Narrator = { step: () => {}, say: () => {}, snapshot: async () => {} };
    const up = await bringUp({ demo, watch, timeline, narrator });
    const host = demo.cluster.node(up.subscriberHost);
    const versionBefore = watch.version(demo.datasets[0]!.ref);
    host.crash();
    for (let i = 0; i < 100 && !(watch.host !== host && converged(demo, watch)); i++) {
      watch.ensureHost();
      await driver.advance(100);
    }
    expect(watch.rehosted).toBe(1);
    expect(watch.host).not.toBe(host);
    expect(converged(demo, watch)).toBe(true);
    expect(watch.version(demo.datasets[0]!.ref)).toBeGreaterThan(versionBefore);
    expect(watch.map(demo.datasets[0]!.ref)!.numShardsForNode(host.node)).toBe(0);
    watch.close();
    await timeline.settle(demo.cluster.stop(), 10_000, 'stopping the cluster');
  });
});

describe('view helpers', () => {
  it('compresses shard lists into ranges', () => {
    expect(ranges([0, 1, 2, 3, 8, 10, 11])).toBe('0-3, 8, 10-11');
    expect(ranges([])).toBe('');
  });

  it('wraps long lines at spaces with a hanging indent', () => {
    expect(wrap('   one two three four', 12)).toEqual(['   one two', '     three', '     four']);
    expect(wrap('short', 12)).toEqual(['short']);
  });
});

describe('the screen', () => {
  // eslint-disable-next-line no-control-regex -- ANSI escapes are what these tests strip
  const ANSI = /\x1b\[[0-9;?]*[A-Za-z]/g;
  const output = (tty: boolean, rows = 30) => {
    let text = '';
    return { out: { isTTY: tty, rows, columns: 40, write: (s: string) => void (text += s) }, text: () => text };
  };
  const view = async () => ({ elapsedMs: 1_500, lines: Array.from({ length: 6 }, (_, i) => `view line ${i} `.repeat(4)) });

  it('in a terminal, draws frames from the top that never outgrow it', async () => {
    const o = output(true);
    const screen = new Screen(o.out, 'title', view);
    screen.start();
    screen.step('a. first');
    for (let i = 0; i < 20; i++) screen.say(`story line ${i}`);
    await screen.stop();
    const frames = o.text().split('\x1b[H').slice(1);
    expect(frames.length).toBeGreaterThanOrEqual(1);
    for (const f of frames) {
      const lines = f
        .replace(ANSI, '')
        .split('\n')
        .filter((l, i, all) => i < all.length - 1);
      expect(lines.length).toBeLessThanOrEqual(29);
      for (const l of lines) expect(l.length).toBeLessThanOrEqual(40);
    }
    expect(o.text()).toContain('story line 19'); // the latest story lines are on screen
    expect(o.text()).not.toContain('story line 0\x1b'); // the oldest scrolled away
  });

  it('cuts a view taller than the terminal instead of scrolling', async () => {
    const o = output(true, 12);
    const screen = new Screen(o.out, 'title', view);
    screen.start();
    await screen.stop();
    const last = o.text().split('\x1b[H').at(-1)!.replace(ANSI, '').trimEnd().split('\n');
    expect(last).toHaveLength(11);
    expect(last.at(-1)).toMatch(/^\.\.\. \d+ more lines$/);
  });

  it('in a pipe, prints the story as it comes and a plain snapshot when asked', async () => {
    const o = output(false);
    const screen = new Screen(o.out, 'title', view);
    screen.start();
    screen.step('a. first');
    screen.say('hello');
    await screen.snapshot();
    await screen.stop();
    expect(o.text()).not.toContain('\x1b');
    expect(o.text()).toContain('== a. first\n   hello\n');
    expect(o.text()).toContain('-- the cluster at t+1.5 s --');
    expect(o.text()).toContain('view line 5');
  });
});
