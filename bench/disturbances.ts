/**
 * Trouble for a soak, each started and stopped by the caller: short SIGSTOP/SIGCONT pauses of
 * random node processes, and a process that keeps every core busy.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import type { ProcessCluster } from '../test/support/process-cluster.js';
import { sleep } from './runtime-support.js';

export interface PauseFigures {
  pauses: number;
  longestMs: number;
}

/**
 * Until stopped: SIGSTOP of a random live node for a random time up to `maxPauseMs`, SIGCONT, then
 * `gapMs` (a random time in the range) before the next pause. `stop()` resolves once the paused
 * node (if any) runs again.
 */
export function randomPauses(
  cluster: ProcessCluster,
  names: readonly string[],
  maxPauseMs: number,
  gapMs: readonly [number, number],
): { figures: PauseFigures; stop(): Promise<void> } {
  const figures: PauseFigures = { pauses: 0, longestMs: 0 };
  let running = true;
  const loop = (async () => {
    while (running) {
      const live = names.filter((n) => cluster.live().some((p) => p.name === n));
      const victim = live[Math.floor(Math.random() * live.length)];
      if (victim !== undefined) {
        const pauseMs = Math.round(Math.random() * maxPauseMs);
        const t0 = performance.now();
        cluster.signal(victim, 'SIGSTOP');
        await sleep(pauseMs);
        cluster.signal(victim, 'SIGCONT');
        figures.pauses += 1;
        figures.longestMs = Math.max(figures.longestMs, performance.now() - t0);
      }
      await sleep(gapMs[0] + Math.random() * (gapMs[1] - gapMs[0]));
    }
  })();
  return {
    figures,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

/** A process with one spinning thread per core (the machine saturated), until `stop()`. */
export function busyCores(threads = os.cpus().length): { stop(): Promise<void> } {
  const code = `const { Worker } = require('node:worker_threads');
for (let i = 1; i < ${threads}; i++) new Worker('for (;;) {}', { eval: true });
for (;;) {}`;
  const child: ChildProcess = spawn(process.execPath, ['-e', code], { stdio: 'ignore' });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  // A benchmark that dies must not leave the machine spinning.
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  return {
    stop: async () => {
      process.off('exit', kill);
      child.kill('SIGKILL');
      await exited;
    },
  };
}
