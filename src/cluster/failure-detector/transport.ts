// The failure detector's transport port (docs/ARCHITECTURE.md §11.3): connections that carry
// detector messages and say how they ended, because how a connection ends is itself a signal — a
// refused or closed one means nothing listens there any more. TCP in a real deployment, memory in
// embedded mode and the simulator.
import type { DetectorMessage } from './messages.js';

/**
 * How a connection ended, seen from this side:
 * - `refused`: nothing listens at the address (the process is gone, or never was there — or a
 *   middlebox or a full accept queue answers as if: a hint, never proof);
 * - `closed`: the other side closed it or died (its kernel closed the socket);
 * - `error`: the network failed it (unreachable, reset by a middlebox): no proof of anything;
 * - `timeout`: it could not be opened in time (a host that does not answer at all).
 * A connection this side closed itself ends without an event.
 */
export type LinkEnd = 'refused' | 'closed' | 'error' | 'timeout';

/** What the owner of a connection hears. */
export interface LinkEvents {
  /** A well-formed message of this cluster (the transport drops and counts the others). */
  readonly message: (message: DetectorMessage) => void;
  /** The connection ended (not by this side): nothing more arrives on it. */
  readonly ended: (why: LinkEnd) => void;
}

/** One connection. */
export interface DetectorLink {
  /**
   * Queues `message`; false if the connection has ended, or if so much is already waiting to go
   * out that the other side is surely not reading (the message is dropped: a heartbeat that waits
   * is worth nothing).
   */
  send(message: DetectorMessage): boolean;
  /** Closes it from this side (no `ended` event). */
  close(): void;
  readonly open: boolean;
  /** The handshake completed (until then, what is sent waits in the socket's buffer). */
  readonly established: boolean;
}

export interface DetectorTransport {
  /**
   * Opens this incarnation's endpoint; every accepted connection is handed to `accept`, which
   * returns the events its owner wants. Resolves with the address others reach it at.
   */
  listen(accept: (link: DetectorLink) => LinkEvents): Promise<string>;
  /**
   * A connection to `address`; `events.ended('refused')` when nothing listens there. Events come
   * later, never from within `connect` (the caller registers what it waits for first).
   */
  connect(address: string, events: LinkEvents): DetectorLink;
  /** Closes the endpoint and every connection, without events. */
  close(): Promise<void>;
  /** As the process's death would: an in-process transport's stand-in for SIGKILL (a real process just dies). */
  kill?(): void;
}
