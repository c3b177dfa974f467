// The packed encoding of a map's changes (events format 4): all of a decision's events in one
// string, where the compact encoding (format 3) makes a list per event. A join wave's round is tens
// of thousands of events, over a megabyte, and every node parses it in one call that cannot be cut
// into slices (60–80 ms in the nodes of a join wave); one string parses in a few. The events are
// then unpacked in slices.
//
// Events are comma-separated `<type letter><shard>:<node index>[:<detail>]`, the detail a progress
// (`R`) or an index into the table of error messages (`E`): `I12:0,C12:3,R7:1:45.5,E9:2:0`.
import { checkedEvent, decodeMessages, decodeNodes, EVENT_LETTER, fail, indexIn, messageAt, nodeAt, progressIn, StringTable } from './codec-shared.js';
import type { DatasetRef } from './ids.js';
import { ITEMS_PER_STEP, type Steps } from './steps.js';
import type { ShardEvent } from './status.js';

/** The format of packed events; a reader of whole-map format 4 reads them too. */
export const PACKED_EVENTS_FORMAT = 4;

/** A decision's events packed, with the tables they refer to. */
export interface PackedEvents {
  readonly format: typeof PACKED_EVENTS_FORMAT;
  readonly nodes: readonly string[];
  readonly messages: readonly string[];
  readonly events: string;
}

export function packEvents(events: readonly ShardEvent[]): PackedEvents {
  const nodes = new StringTable();
  const messages = new StringTable();
  const packed = events.map((e) => {
    const head = `${EVENT_LETTER[e.type]}${e.shard}:${nodes.of(e.node)}`;
    if (e.type === 'RecoveryInProgress') return `${head}:${e.progressPct}`;
    if (e.type === 'IngestionError') return `${head}:${messages.of(e.error)}`;
    return head;
  });
  return { format: PACKED_EVENTS_FORMAT, nodes: nodes.values, messages: messages.values, events: packed.join(',') };
}

/** The digits of `text` in `from..to` (1 to 9 of them, nothing else) as a number, else -1. */
function wholeIn(text: string, from: number, to: number): number {
  if (to <= from || to - from > 9) return -1;
  let value = 0;
  for (let i = from; i < to; i++) {
    const d = text.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return -1;
    value = value * 10 + d;
  }
  return value;
}

/**
 * Unpacks events for `dataset`, checking every field, a thousand per step; throws `Malformed`.
 * Read by scanning the one string, not by a split and a pattern per event (twice as slow).
 */
export function* packedEventsDecoding(raw: { readonly nodes?: unknown; readonly messages?: unknown; readonly events?: unknown }, dataset: DatasetRef, numShards: number): Steps<ShardEvent[]> {
  const nodes = decodeNodes(raw.nodes, 'nodes');
  const messages = decodeMessages(raw.messages, 'messages');
  const text = raw.events;
  if (typeof text !== 'string') return fail('events', 'not a string of packed events');
  const events: ShardEvent[] = [];
  for (let i = 0; i < text.length || (i === text.length && i > 0 && text[i - 1] === ','); ) {
    const k = events.length;
    const comma = text.indexOf(',', i);
    const end = comma < 0 ? text.length : comma;
    const shardEnd = text.indexOf(':', i + 1);
    const nodeEnd = shardEnd < 0 || shardEnd >= end ? -1 : text.indexOf(':', shardEnd + 1);
    const detailAt = nodeEnd < 0 || nodeEnd >= end ? -1 : nodeEnd + 1;
    const shard = shardEnd < 0 || shardEnd >= end ? -1 : wholeIn(text, i + 1, shardEnd);
    const node = shard < 0 ? -1 : wholeIn(text, shardEnd + 1, detailAt < 0 ? end : nodeEnd);
    const letter = text[i];
    const detailText = detailAt < 0 ? undefined : text.slice(detailAt, end);
    if (node < 0 || letter === undefined || letter < 'A' || letter > 'Z' || detailText === '' || detailText?.includes(':')) {
      return fail(`events[${k}]`, `not a packed event (type, shard:node[:detail]): ${JSON.stringify(text.slice(i, Math.min(end, i + 40)))}`);
    }
    const detail = detailText === undefined ? undefined : letter === 'R' ? progressIn(detailText) : letter === 'E' ? messageAt(messages, indexIn(detailText), `events[${k}].error`) : detailText;
    const nodeId = node < nodes.length ? nodes[node]! : nodeAt(nodes, node, `events[${k}].node`);
    events.push(checkedEvent({ letter, shard, node: nodeId, detail, hasDetail: detailText !== undefined }, dataset, numShards, `events[${k}]`));
    if (k % ITEMS_PER_STEP === ITEMS_PER_STEP - 1) yield;
    i = end + 1;
  }
  return events;
}
