// Which consumer group a singleton reads the inbox in, and where it starts. Each singleton epoch
// has a group of its own: in one shared group a new singleton would get the inbox's partition only
// once the broker dropped the dead singleton's member, a whole Kafka session after a crash, however
// fast the failure detector found the crash. A new group starts where the last singleton's left
// off: every singleton commits only what it applied, so the newest group with a position holds the
// furthest one (docs/ARCHITECTURE.md §6).
import type { Bus } from '../cluster/bus.js';

/** The inbox group of the singleton of `epoch`. */
export function inboxGroup(inbox: string, epoch: number): string {
  return `${inbox}.singleton.${epoch}`;
}

/** The one group every singleton shared before groups were per epoch (a cluster upgraded in place). */
export function sharedInboxGroup(inbox: string): string {
  return `${inbox}.singleton`;
}

/** How many earlier epochs are asked for a position before the shared group (a singleton commits its start at once, so the one before nearly always has it). */
const LOOK_BACK_EPOCHS = 64;

/**
 * Where the singleton of `epoch` starts reading the inbox: the position of the newest earlier
 * epoch's group that has one, else the shared group's, else undefined (the inbox's start).
 */
export async function inboxStart(bus: Pick<Bus, 'committedOffset'>, inbox: string, epoch: number): Promise<number | undefined> {
  for (let e = epoch - 1; e >= Math.max(1, epoch - LOOK_BACK_EPOCHS); e--) {
    const position = await bus.committedOffset(inbox, inboxGroup(inbox, e));
    if (position !== undefined) return position;
  }
  return bus.committedOffset(inbox, sharedInboxGroup(inbox));
}
