// Process warnings as Node prints them, less one that says nothing an operator can act on.
//
// kafkajs 2.2.4 (its last release) arms its request queue's throttle check with
// `throttledUntil - Date.now()` before any throttle is known (`throttledUntil` is -1): a negative
// delay, which Node runs after 1 ms, as kafkajs expects, and which Node 24 reports as a
// `TimeoutNegativeWarning` on stderr for every broker connection. This process is ours, so it drops
// that one warning when its stack names kafkajs's request queue, and prints every other warning
// with Node's own printer. A library does not do this: an application's warnings are its own.
const KAFKAJS_REQUEST_QUEUE = /kafkajs[\\/]src[\\/]network[\\/]requestQueue[\\/]/;

/** True for the one warning this process does not print. */
export function isKafkajsNegativeTimeout(warning: Error): boolean {
  return warning.name === 'TimeoutNegativeWarning' && KAFKAJS_REQUEST_QUEUE.test(warning.stack ?? '');
}

let installed = false;

/** Replaces the process's warning printers by the same printers, skipping kafkajs's negative timeout (once per process). */
export function skipKafkajsNegativeTimeouts(): void {
  if (installed) return;
  installed = true;
  const printers = process.listeners('warning');
  process.removeAllListeners('warning');
  process.on('warning', (warning) => {
    if (isKafkajsNegativeTimeout(warning)) return;
    for (const print of printers) print(warning);
  });
}
