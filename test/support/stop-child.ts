// Stops a demo (or any child process) the way an operator would, with Ctrl-C (SIGINT), and kills
// it if it has not exited 10 s later: a test leaves no process behind, even one that hangs.
import type { ChildProcess } from 'node:child_process';

export async function stopChild(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((done) => child.once('exit', done));
  child.kill('SIGINT');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}
