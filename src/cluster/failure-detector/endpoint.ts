// A node incarnation's detector endpoint (docs/ARCHITECTURE.md §11.2): it answers pings, probes for
// the singleton when asked (and votes), and, while its node hosts the singleton, hands heartbeats
// and goodbyes to it. Frames addressed to someone else, or meant for a singleton this node does not
// host, are dropped and counted, never acted on.
import type { DroppedFrames } from './dropped.js';
import { DETECTOR_FORMAT, memberKey, sameMember, type DetectorMessage, type MemberRef } from './messages.js';
import { probeVote } from './probe-vote.js';
import type { Prober } from './prober.js';
import type { FailureDetectorSettings } from './settings.js';
import type { DetectorLink, DetectorTransport } from './transport.js';

type HeartbeatIn = Extract<DetectorMessage, { type: 'heartbeat' }>;

/** The singleton's side of the endpoint, while this node hosts it. */
export interface SingletonDesk {
  /** A heartbeat addressed to this incarnation; the answer (grant, evicted) goes back on `link`. */
  heartbeat(message: HeartbeatIn, link: DetectorLink): void;
  /** A node releases its lease before it leaves. */
  goodbye(from: MemberRef): void;
  /** The connection `from`'s heartbeats came on ended (not by this side). */
  linkEnded(from: MemberRef, why: 'refused' | 'closed' | 'error' | 'timeout'): void;
}

export interface EndpointOptions {
  readonly transport: DetectorTransport;
  readonly self: MemberRef;
  readonly cluster: string;
  readonly prober: Prober;
  readonly settings: Pick<FailureDetectorSettings, 'heartbeatIntervalMs'>;
  readonly dropped: DroppedFrames;
  /** A singleton announced itself: heartbeats should go to it (if it is newer than the one followed). */
  readonly onSingleton?: (announcement: Extract<DetectorMessage, { type: 'singleton' }>) => void;
}

export class DetectorEndpoint {
  private desk: SingletonDesk | undefined;
  private addressValue: string | undefined;

  constructor(private readonly o: EndpointOptions) {}

  /** Opens the endpoint; resolves with its address (what the node advertises in its membership). */
  async start(): Promise<string> {
    this.addressValue = await this.o.transport.listen((link) => {
      let sender: MemberRef | undefined;
      return {
        message: (m) => {
          if (m.type === 'heartbeat' || m.type === 'goodbye') sender ??= m.from;
          this.receive(m, link);
        },
        ended: (why) => {
          if (sender) this.desk?.linkEnded(sender, why);
        },
      };
    });
    return this.addressValue;
  }

  get address(): string | undefined {
    return this.addressValue;
  }

  /** Hands heartbeats to `desk` from now on (this node hosts the singleton), or to nobody. */
  host(desk: SingletonDesk | undefined): void {
    this.desk = desk;
  }

  private receive(m: DetectorMessage, link: DetectorLink): void {
    const { self, cluster } = this.o;
    if (!sameMember(m.to, self)) {
      this.o.dropped.drop({ cause: 'wrong-addressee', detail: `${m.type} for ${memberKey(m.to)}, this is ${memberKey(self)}` }, memberKey(m.from));
      return;
    }
    switch (m.type) {
      case 'ping':
        link.send({ format: DETECTOR_FORMAT, cluster, type: 'ack', from: self, to: m.from, seq: m.seq });
        return;
      case 'ping-req':
        void this.o.prober.probe(m.address, m.target).then((outcome) => {
          link.send({
            format: DETECTOR_FORMAT,
            cluster,
            type: 'vote',
            from: self,
            to: m.from,
            seq: m.seq,
            target: m.target,
            vote: probeVote(outcome, this.o.settings),
          });
        });
        return;
      case 'heartbeat':
        if (this.desk) this.desk.heartbeat(m, link);
        else this.o.dropped.drop({ cause: 'not-singleton', detail: `heartbeat ${m.seq} from ${memberKey(m.from)}` }, memberKey(m.from));
        return;
      case 'singleton':
        this.o.onSingleton?.(m);
        return;
      case 'goodbye':
        if (this.desk) this.desk.goodbye(m.from);
        else this.o.dropped.drop({ cause: 'not-singleton', detail: `goodbye from ${memberKey(m.from)}` }, memberKey(m.from));
        return;
      default:
        // Answers (grant, evicted, ack, vote) come back on the connections their asker opened.
        this.o.dropped.drop(
          { cause: 'replayed', detail: `${m.type} ${m.seq} from ${memberKey(m.from)} on a connection that asked nothing` },
          memberKey(m.from),
        );
    }
  }
}
