// The packed encoding of a map's changes (events format 4): all of a decision's events in one
// string, where the compact encoding (format 3) makes a list per event. A join wave's round is tens
// of thousands of events, over a megabyte, and every node parses it in one call that cannot be cut
// into slices (60–80 ms in the nodes of a join wave); one string parses in a few. The events are
// then unpacked in slices.
//
// Events are comma-separated `<type letter><shard>:<node index>[:<detail>]`, the detail a progress
// (`R`) or an index into the table of error messages (`E`): `I12:0,C12:3,R7:1:45.5,E9:2:0`.
import {
  checkedEvent,
  decodeMessages,
  decodeNodes,
  digitsEnd,
  EVENT_LETTER,
  fail,
  indexIn,
  messageAt,
  nodeAt,
  PACKED_FORMAT,
  progressIn,
  wholeIn,
} from './codec-shared.js';
import { StringTable } from './string-table.js';
import type { DatasetRef } from './ids.js';
import { ITEMS_PER_STEP, type Steps } from './steps.js';
import type { ShardEvent } from './status.js';

/** A decision's events packed, with the tables they refer to. */
export interface PackedEvents {
  readonly format: typeof PACKED_FORMAT;
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
  return { format: PACKED_FORMAT, nodes: nodes.values, messages: messages.values, events: packed.join(',') };
}

/**
 * Unpacks events for `dataset`, checking every field, a thousand per step; throws `Malformed`.
 * Read by scanning the one string, not by a split and a pattern per event (twice as slow).
 */
export function* packedEventsDecoding(
  raw: { readonly nodes?: unknown; readonly messages?: unknown; readonly events?: unknown },
  dataset: DatasetRef,
  numShards: number,
): Steps<ShardEvent[]> {
  const nodes = decodeNodes(raw.nodes, 'nodes');
  const messages = decodeMessages(raw.messages, 'messages');
  const text = raw.events;
  if (typeof text !== 'string') return fail('events', 'not a string of packed events');
  const events: ShardEvent[] = [];
  // Events are the comma-separated parts of the string (none when it is empty).
  for (let from = 0, end = 0; from < text.length || end < text.length; from = end + 1) {
    const k = events.length;
    const comma = text.indexOf(',', from);
    end = comma < 0 ? text.length : comma;
    const shardEnd = digitsEnd(text, from + 1, end);
    const nodeEnd = text[shardEnd] === ':' ? digitsEnd(text, shardEnd + 1, end) : -1;
    const letter = text[from];
    const detailText = nodeEnd >= 0 && nodeEnd < end ? text.slice(nodeEnd + 1, end) : undefined;
    const shard = nodeEnd < 0 ? -1 : wholeIn(text, from + 1, shardEnd);
    const node = nodeEnd < 0 ? -1 : wholeIn(text, shardEnd + 1, nodeEnd);
    const badDetail = detailText !== undefined && (text[nodeEnd] !== ':' || detailText === '' || detailText.includes(':'));
    if (shard < 0 || node < 0 || letter === undefined || letter < 'A' || letter > 'Z' || badDetail) {
      return fail(`events[${k}]`, `not a packed event (type, shard:node[:detail]): ${JSON.stringify(text.slice(from, Math.min(end, from + 40)))}`);
    }
    const detail =
      detailText === undefined
        ? undefined
        : letter === 'R'
          ? progressIn(detailText)
          : letter === 'E'
            ? messageAt(messages, indexIn(detailText), `events[${k}].error`)
            : detailText;
    events.push(
      checkedEvent(
        { letter, shard, node: nodeAt(nodes, node, `events[${k}].node`), detail, hasDetail: detailText !== undefined },
        dataset,
        numShards,
        `events[${k}]`,
      ),
    );
    if (k % ITEMS_PER_STEP === ITEMS_PER_STEP - 1) yield;
  }
  return events;
}
