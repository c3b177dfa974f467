// A node's requests to the singleton and the replies to them, outside the guardian's mailbox. The
// guardian applies maps there, in slices but whole: a new 65 536-shard dataset's map held each
// guardian of the embedded demo for about 470 ms, and every request an HTTP route sent from that
// node waited behind it, then its reply again (issue 34). A request is only a record for the
// inbox and a reply only an answer for the hub: neither needs the guardian's state but the newest
// singleton epoch the node knows.
import type { BusRecord } from '../cluster/bus.js';
import { encodeInboxMessage, hostPrefix, parseRepliesMessage, WIRE_FORMAT, type Request } from '../protocol/wire.js';
import type { NodeEnv } from './node-env.js';
import type { NodeHub } from './node-hub.js';

export class RequestLane {
  private readonly prefix: string;

  constructor(
    private readonly env: Pick<NodeEnv, 'bus' | 'topics' | 'node' | 'incarnation' | 'clock' | 'singletonContact' | 'log'>,
    private readonly hub: NodeHub,
    /** The newest singleton epoch the node's guardian has seen: a reply from an older one is not taken. */
    private readonly newestEpoch: () => number,
  ) {
    this.prefix = hostPrefix(env.node, env.incarnation);
  }

  /**
   * Hands a request to the inbox. The bus appends in call order, so one node's requests reach the
   * singleton in the order they were sent. A request the bus fails gets no reply: its sender's
   * timeout says so, as for a request lost on the way.
   */
  send(request: Request): void {
    this.env.bus.produce(this.env.topics.inbox, encodeInboxMessage({ format: WIRE_FORMAT, kind: 'request', request })).catch((e: unknown) => {
      this.env.log.warn(
        { event: 'request.send-failed', err: e, request: request.type },
        'a request to the singleton was not sent: its sender waits for its reply until its timeout',
      );
    });
  }

  /**
   * Takes a record of the replies topic if it is a reply (false: an acknowledgement or a malformed
   * record, the guardian's). A reply to one of this node's requests resolves it.
   */
  takeReply(record: BusRecord): boolean {
    const raw = record.value as { kind?: unknown; to?: unknown; epoch?: unknown } | null;
    if (raw?.kind !== 'reply') return false;
    if (typeof raw.to === 'string' && !raw.to.startsWith(this.prefix)) {
      // Another node's: not read (a map in it is megabytes to decode), only heard.
      if (typeof raw.epoch === 'number' && raw.epoch >= this.newestEpoch()) this.env.singletonContact?.heard(this.env.clock.now());
      return true;
    }
    const parsed = parseRepliesMessage(record.value);
    if (!parsed.ok || parsed.value.kind !== 'reply') return false;
    const m = parsed.value;
    if (m.epoch < this.newestEpoch()) return true; // a replaced singleton's
    this.env.singletonContact?.heard(this.env.clock.now());
    this.hub.resolve(m.to, m.reply);
    return true;
  }
}
