// A `shardherd node` process survives one known race of cassandra-driver 4.10.0 (its latest
// release), and nothing else. While Cassandra is away the driver's control connection retries on a
// timer (`setTimeout(() => this._refresh(), delay)`, a promise nobody awaits); when a second
// reconnection started by a host-down event runs beside it, the first can find `this.host` reset by
// the second and throw `TypeError: Cannot read properties of null (reading 'once')` in
// `_setHealthListeners` (upstream NODEJS-681; a fix is proposed, not released). Node then ends the
// process on the unhandled rejection: a node process died that way when Cassandra came back after a
// SIGKILL. The other reconnection goes on and sets the host and its listeners itself, so the process
// logs the race and keeps running. Every other unhandled rejection still ends the process, as Node
// does by default. A library does not do this: the process is ours.
import type { Logger } from 'pino';

const CONTROL_CONNECTION = /cassandra-driver[\\/]lib[\\/]control-connection\.js/;

/** True for the driver's control-connection race described above, and nothing else. */
export function isCassandraControlConnectionRace(reason: unknown): boolean {
  if (!(reason instanceof TypeError)) return false;
  const stack = reason.stack ?? '';
  return /_setHealthListeners/.test(stack) && CONTROL_CONNECTION.test(stack);
}

/**
 * What the process does with an unhandled rejection: the driver's race is logged and the process
 * goes on; anything else is thrown again, which ends the process as Node's default does.
 */
export function onUnhandledRejection(reason: unknown, log: Logger): void {
  if (!isCassandraControlConnectionRace(reason)) throw reason;
  log.warn(
    { event: 'metastore.driver-race', err: reason },
    "cassandra-driver's control connection raced with its own reconnection (upstream NODEJS-681): the other reconnection goes on; the node keeps running",
  );
}
