// Preloaded into node processes by benchmarks (`--import`), never by the product: every gap of
// 50 ms or more in a 10 ms timer's firing, with the CPU time the process used meanwhile, one line
// each in `$SHARDHERD_GAP_DIR/gaps-<pid>.log` (the first line names the process by its arguments).
// The event-loop delay monitor sees a gap either way; the CPU tells a loop busy with its own work
// (CPU about the gap's length) from a process the machine did not run (little CPU).
/* global process, performance, setInterval */
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.env.SHARDHERD_GAP_DIR;
if (dir) {
  const file = join(dir, `gaps-${process.pid}.log`);
  appendFileSync(file, `argv ${process.argv.slice(2).join(' ')}\n`);
  const TICK_MS = 10;
  let last = performance.now();
  let cpu = process.cpuUsage();
  setInterval(() => {
    const now = performance.now();
    const gap = now - last - TICK_MS;
    const used = process.cpuUsage(cpu);
    if (gap >= 50) appendFileSync(file, `${Date.now()} ${gap.toFixed(0)} ${((used.user + used.system) / 1000).toFixed(0)}\n`);
    last = now;
    cpu = process.cpuUsage();
  }, TICK_MS).unref();
}
