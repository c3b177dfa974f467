// Probes (docs/ARCHITECTURE.md §11.5): a direct `ping` that waits for its `ack`, and a `ping-req`
// that asks a helper to probe for us and waits for its vote. One connection per address is kept
// and reused; how it ends is part of the answer (refused or closed: nothing answered there, a hint
// that the process is gone, never proof of it: §11.3).
import type { Clock, Cancel } from '../clock.js';
import type { DroppedFrames } from './dropped.js';
import { DETECTOR_FORMAT, memberKey, memberRef, sameMember, type DetectorMessage, type MemberRef, type Vote } from './messages.js';
import type { ProbeOutcome } from './probe-vote.js';
import { probeTimeoutMs, type FailureDetectorSettings } from './settings.js';
import type { DetectorLink, DetectorTransport, LinkEnd } from './transport.js';

interface Waiting {
  /** Whose answer it waits for. */
  readonly from: MemberRef;
  readonly kind: 'ack' | 'vote';
  readonly answered: (m: DetectorMessage) => void;
  /** The connection ended before the answer came. */
  readonly ended: (why: LinkEnd) => void;
}

interface Connection {
  readonly link: DetectorLink;
  readonly waiting: Map<number, Waiting>;
}

export interface ProberOptions {
  readonly transport: DetectorTransport;
  readonly self: MemberRef;
  readonly cluster: string;
  /** Monotonic in a real process: the timeouts and the lateness of the probe's own timer. */
  readonly clock: Clock;
  readonly settings: Pick<FailureDetectorSettings, 'heartbeatIntervalMs'>;
  readonly dropped: DroppedFrames;
}

export class Prober {
  private readonly connections = new Map<string, Connection>();
  private seq = 0;
  private closed = false;

  constructor(private readonly o: ProberOptions) {}

  /**
   * Pings `target` at `address` (again at a third and two thirds of the probe timeout while
   * unanswered) and resolves with how that ended: `acked`, `refused` (the connection was refused,
   * or closed while waiting), or `timed-out` after the probe timeout, with how late the timer fired
   * (a late timer means this process did not run meanwhile).
   */
  probe(address: string, target: MemberRef): Promise<ProbeOutcome> {
    return new Promise((resolve) => {
      const timeoutMs = probeTimeoutMs(this.o.settings);
      const due = this.o.clock.now() + timeoutMs;
      const ping = (seq: number): DetectorMessage => ({
        format: DETECTOR_FORMAT,
        cluster: this.o.cluster,
        type: 'ping',
        from: this.o.self,
        to: memberRef(target),
        seq,
      });
      this.request(
        address,
        target,
        'ack',
        timeoutMs,
        ping,
        {
          answered: () => resolve({ kind: 'acked' }),
          refused: () => resolve({ kind: 'refused' }),
          timedOut: () => resolve({ kind: 'timed-out', latenessMs: Math.max(0, this.o.clock.now() - due) }),
        },
        [timeoutMs / 3, (2 * timeoutMs) / 3],
      );
    });
  }

  /**
   * Asks `helper` (at `helperAddress`) to probe `target` at `targetAddress` for the singleton of
   * `epoch`; resolves with its vote, or undefined if it did not answer within its probe timeout and
   * one heartbeat more (a helper that cannot be reached casts no vote).
   */
  ask(helperAddress: string, helper: MemberRef, target: MemberRef, targetAddress: string, epoch: number): Promise<Vote | undefined> {
    return new Promise((resolve) => {
      const waitMs = probeTimeoutMs(this.o.settings) + this.o.settings.heartbeatIntervalMs;
      const build = (seq: number): DetectorMessage => ({
        format: DETECTOR_FORMAT,
        cluster: this.o.cluster,
        type: 'ping-req',
        from: this.o.self,
        to: memberRef(helper),
        seq,
        epoch,
        target: memberRef(target),
        address: targetAddress,
      });
      this.request(helperAddress, helper, 'vote', waitMs, build, {
        answered: (m) => resolve(m.type === 'vote' && sameMember(m.target, target) ? m.vote : undefined),
        refused: () => resolve(undefined),
        timedOut: () => resolve(undefined),
      });
    });
  }

  /** Sends `build(seq)` to `address` on the reused connection, expecting no answer. */
  tell(address: string, build: (seq: number) => DetectorMessage): void {
    if (this.closed) return;
    try {
      this.connectionTo(address).link.send(build(++this.seq));
    } catch {
      // an address that cannot be parsed: nobody to tell
    }
  }

  /** Closes every connection; probes under way end as timed out at their timers. */
  close(): void {
    this.closed = true;
    for (const c of this.connections.values()) c.link.close();
    this.connections.clear();
  }

  /**
   * Sends `build(seq)` to `address` and waits for the answer of kind `kind` from `to`, for at most
   * `timeoutMs`. With `resends`, the request goes out again (with a new number) at each of those
   * delays while unanswered: any answer counts, so one lost message does not fail the request.
   */
  private request(
    address: string,
    to: MemberRef,
    kind: Waiting['kind'],
    timeoutMs: number,
    build: (seq: number) => DetectorMessage,
    outcome: { answered: (m: DetectorMessage) => void; refused: () => void; timedOut: () => void },
    resends: readonly number[] = [],
  ): void {
    const seqs: { seq: number; connection: Connection }[] = [];
    const timers: Cancel[] = [];
    let done = false;
    const finish = (then: () => void) => {
      if (done) return;
      done = true;
      for (const cancel of timers) cancel();
      for (const { seq, connection } of seqs) connection.waiting.delete(seq);
      then();
    };
    const waiting: Waiting = {
      from: to,
      kind,
      answered: (m) => finish(() => outcome.answered(m)),
      // Refused or closed: nothing listens for the target any more, the strong signal. A network
      // error or a connect timeout proves nothing: the request waits for its timer (or a resend).
      // A helper that cannot be reached casts no vote either way.
      ended: (why) => {
        if (kind === 'vote') finish(outcome.refused);
        else if (why === 'refused' || why === 'closed') finish(outcome.refused);
      },
    };
    let resend = false;
    const send = () => {
      if (done || this.closed) return;
      let connection: Connection;
      try {
        // A resend does not wait behind a handshake still under way (it was sent into a cut that
        // may have healed since, and would only time out): it dials again, as a new SYN would.
        if (resend) this.dropUnestablished(address);
        resend = true;
        connection = this.connectionTo(address);
      } catch {
        return; // an address that cannot be parsed: silence, as a host that does not answer
      }
      const seq = ++this.seq;
      seqs.push({ seq, connection });
      connection.waiting.set(seq, waiting);
      connection.link.send(build(seq));
    };
    timers.push(this.o.clock.schedule(timeoutMs, () => finish(outcome.timedOut)));
    for (const delay of resends) timers.push(this.o.clock.schedule(delay, send));
    send();
  }

  private dropUnestablished(address: string): void {
    const c = this.connections.get(address);
    if (!c || c.link.established) return;
    this.connections.delete(address);
    c.link.close();
  }

  private connectionTo(address: string): Connection {
    const existing = this.connections.get(address);
    if (existing?.link.open) return existing;
    const waiting = new Map<number, Waiting>();
    const link = this.o.transport.connect(address, {
      message: (m) => {
        const w = m.type === 'ack' || m.type === 'vote' ? waiting.get(m.seq) : undefined;
        if (w && w.kind === m.type && sameMember(w.from, m.from) && sameMember(m.to, this.o.self)) {
          w.answered(m);
          return;
        }
        this.o.dropped.drop({ cause: 'replayed', detail: `${m.type} ${m.seq} from ${memberKey(m.from)} answers no probe under way` }, address);
      },
      ended: (why) => {
        if (this.connections.get(address)?.link === link) this.connections.delete(address);
        for (const w of [...waiting.values()]) w.ended(why);
      },
    });
    const connection = { link, waiting };
    this.connections.set(address, connection);
    return connection;
  }
}
