// What a subscriber or a router embedded beside a node needs of that node: a `ShardherdNode` is
// one. An interface, so that the client depends on the protocol and not on the node's runtime.
import type { Clock } from '../cluster/clock.js';
import type { DatasetRef, Incarnation, SubscriberId } from '../core/ids.js';
import type { SubscriberMessage } from '../core/shard-manager/protocol.js';
import type { Request } from '../protocol/wire.js';

export interface LocalNode {
  /** The node's incarnation now (a subscriber dies with the one it was made in). */
  readonly incarnation: Incarnation | undefined;
  /** `running`, `crashed`, ...: a subscriber of a crashed node stops watching. */
  readonly state: string;
  /** @internal As `ShardherdNode.services`: its clock and settings. */
  readonly services: { readonly clock: Clock; readonly settings: { readonly publishIntervalMs: number } };
  /** Registers a local subscriber: `deliver` gets what the singleton sends it (and the dataset's map changes). */
  registerSubscriber(deliver: (message: SubscriberMessage) => void, name?: string, dataset?: DatasetRef): SubscriberId;
  unregisterSubscriber(id: SubscriberId): void;
  /** Sends a request to the singleton without waiting for a reply. */
  tell(request: Request): void;
}
