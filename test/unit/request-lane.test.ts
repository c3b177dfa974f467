// A node's requests and their replies go beside the guardian's mailbox (issue 34: an HTTP route's
// request waited about 470 ms behind a 65 536-shard map being applied there, then its reply again).
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { NodeHub } from '../../src/actors/node-hub.js';
import { RequestLane } from '../../src/actors/request-lane.js';
import { SingletonContact } from '../../src/actors/singleton-contact.js';
import { encodeRepliesMessage, topicsFor, WIRE_FORMAT, type RepliesMessage } from '../../src/protocol/wire.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { MemoryBus } from '../../src/cluster/memory-bus.js';
import { epoch, incarnation, nodeId, replyTo, type ReplyTo } from '../../src/core/ids.js';
import type { Reply } from '../../src/core/shard-manager/protocol.js';

function lane(newest = 3) {
  const clock = new SimulatedClock(1_000);
  const bus = new MemoryBus(clock);
  const hub = new NodeHub();
  const contact = new SingletonContact();
  const topics = topicsFor('lane');
  const env = { bus, topics, node: nodeId('a'), incarnation: incarnation('a#1'), clock, singletonContact: contact, log: pino({ level: 'silent' }) };
  return { lane: new RequestLane(env, hub, () => newest), bus, hub, contact, topics, clock };
}

/** Registers a request waiting for `to`; the replies it got. */
function waiting(hub: NodeHub, to: ReplyTo): Reply[] {
  const got: Reply[] = [];
  hub.expect(
    to,
    (r) => got.push(r),
    () => {},
  );
  return got;
}

const record = (m: RepliesMessage) => ({ topic: 'lane.replies', offset: 0, value: encodeRepliesMessage(m) });
const reply = (e: number, to: string): RepliesMessage => ({ format: WIRE_FORMAT, kind: 'reply', epoch: epoch(e), to: replyTo(to), reply: { type: 'Success' } });

describe('RequestLane', () => {
  it('puts a request on the inbox at once, in the order sent', async () => {
    const { lane: l, bus, topics } = lane();
    l.send({ type: 'ListRegisteredDatasets', replyTo: replyTo('a@a#1/req-1') });
    l.send({ type: 'GetNodeOperations', replyTo: replyTo('a@a#1/req-2') });
    await Promise.resolve();
    expect(bus.topic(topics.inbox).map((r) => (r.value as { request: { type: string } }).request.type)).toEqual([
      'ListRegisteredDatasets',
      'GetNodeOperations',
    ]);
  });

  it("resolves this node's request with its reply, and says the singleton was heard", () => {
    const { lane: l, hub, contact, clock } = lane();
    const got = waiting(hub, replyTo('a@a#1/req-1'));
    expect(l.takeReply(record(reply(3, 'a@a#1/req-1')))).toBe(true);
    expect(got).toEqual([{ type: 'Success' }]);
    expect(contact.silentMs(clock.now())).toBe(0);
  });

  it('takes a reply to another node without resolving anything of this one; the singleton was heard', () => {
    const { lane: l, hub, contact, clock } = lane();
    const got = waiting(hub, replyTo('a@a#1/req-1'));
    expect(l.takeReply(record(reply(3, 'b@b#1/req-1')))).toBe(true);
    expect(got).toEqual([]);
    expect(contact.silentMs(clock.now())).toBe(0);
  });

  it('drops a reply of a replaced singleton: the request waits for the current one', () => {
    const { lane: l, hub, contact, clock } = lane(4);
    const got = waiting(hub, replyTo('a@a#1/req-1'));
    expect(l.takeReply(record(reply(3, 'a@a#1/req-1')))).toBe(true);
    expect(got).toEqual([]);
    expect(contact.silentMs(clock.now())).toBeUndefined();
  });

  it('leaves acknowledgements and malformed records to the guardian', () => {
    const { lane: l } = lane();
    const ack: RepliesMessage = { format: WIRE_FORMAT, kind: 'ack', epoch: epoch(3), node: nodeId('a'), incarnation: incarnation('a#1'), seq: 1, ordinal: 1 };
    expect(l.takeReply(record(ack))).toBe(false);
    expect(l.takeReply({ topic: 'lane.replies', offset: 0, value: { format: WIRE_FORMAT, kind: 'reply', epoch: 3 } })).toBe(false);
    expect(l.takeReply({ topic: 'lane.replies', offset: 0, value: null })).toBe(false);
  });
});
