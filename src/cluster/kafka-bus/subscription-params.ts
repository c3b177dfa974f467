// What the bus hands a subscription, whichever client library it runs on.
import type { MemberPositionParams } from './member-position.js';
import type { RecordReaderParams } from './record-reader.js';

/** A subscription's topic, group and handler, where it starts, and what it tells the bus. */
export interface SubscriptionParams extends MemberPositionParams, RecordReaderParams {
  readonly onClosed: () => void;
  /** When the subscription was opened: the newest of a group's subscriptions owns the topic. */
  readonly openedAt: number;
  readonly fromBeginning: boolean;
}
