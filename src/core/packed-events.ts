// The packed encoding of a map's changes (events format 4): all of a decision's events in one
// string, where the compact encoding (format 3) makes a list per event. A join wave's round is tens
// of thousands of events, over a megabyte, and every node parses it in one call that cannot be cut
// into slices (60–80 ms in the nodes of a join wave); one string parses in a few. The events are
// then unpacked in slices.
//
// Events are comma-separated `<type letter><shard>:<node index>[:<detail>]`, the detail a progress
// (`R`) or an index into the table of error messages (`E`): `I12:0,C12:3,R7:1:45.5,E9:2:0`.
import { checkedEvent, decodeMessages, decodeNodes, EVENT_LETTER, fail, indexIn, messageAt, MessageTable, NodeTable, nodeAt, progressIn } from './codec-shared.js';
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
  const nodes = new NodeTable();
  const messages = new MessageTable();
  const packed = events.map((e) => {
    const head = `${EVENT_LETTER[e.type]}${e.shard}:${nodes.of(e.node)}`;
    if (e.type === 'RecoveryInProgress') return `${head}:${e.progressPct}`;
    if (e.type === 'IngestionError') return `${head}:${messages.of(e.error)}`;
    return head;
  });
  return { format: PACKED_EVENTS_FORMAT, nodes: nodes.nodes, messages: messages.messages, events: packed.join(',') };
}

const EVENT = /^([A-Z])(\d{1,9}):(\d{1,9})(?::([^:]+))?$/;

/** Unpacks events for `dataset`, checking every field, a thousand per step; throws `Malformed`. */
export function* packedEventsDecoding(raw: { readonly nodes?: unknown; readonly messages?: unknown; readonly events?: unknown }, dataset: DatasetRef, numShards: number): Steps<ShardEvent[]> {
  const nodes = decodeNodes(raw.nodes, 'nodes');
  const messages = decodeMessages(raw.messages, 'messages');
  if (typeof raw.events !== 'string') return fail('events', 'not a string of packed events');
  const texts = raw.events === '' ? [] : raw.events.split(',');
  const events = new Array<ShardEvent>(texts.length);
  for (let i = 0; i < texts.length; i++) {
    const at = `events[${i}]`;
    const e = EVENT.exec(texts[i]!);
    if (!e) return fail(at, `not a packed event (type, shard:node[:detail]): ${JSON.stringify(texts[i]!.slice(0, 40))}`);
    const [, letter, shard, node, text] = e;
    const detail = text === undefined ? undefined : letter === 'R' ? progressIn(text) : letter === 'E' ? messageAt(messages, indexIn(text), `${at}.error`) : text;
    events[i] = checkedEvent({ letter, shard: Number(shard), node: nodeAt(nodes, Number(node), `${at}.node`), detail, hasDetail: text !== undefined }, dataset, numShards, at);
    if (i % ITEMS_PER_STEP === ITEMS_PER_STEP - 1) yield;
  }
  return events;
}
