// The failure detector's transport in one process (embedded mode and the simulator), behaving as
// TCP does where the detector can tell: a dead endpoint's connections end `closed` at their peers
// and a connect to it is refused; a paused one accepts connections and queues what it is sent
// until it runs again; each direction of a connection delivers in order. The simulator adds loss,
// delay and partitions per link, each direction on its own, and the refusals and resets a live
// process's endpoint gives now and then (a full accept queue, a proxy or a kernel resetting a
// connection): the endpoint still runs, but a connect to it is refused, or a connection ends `closed`.
import type { Clock } from '../clock.js';
import type { DroppedFrames } from './dropped.js';
import { encodeFrame, parseFrame, type DetectorMessage } from './messages.js';
import type { DetectorLink, DetectorTransport, LinkEnd, LinkEvents } from './transport.js';

/** What happens to one message on its way (the simulator's link faults). */
export type LinkFault = { readonly kind: 'deliver' } | { readonly kind: 'drop' } | { readonly kind: 'delay'; readonly ms: number } | { readonly kind: 'reset' };

export interface MemoryDetectorNetworkOptions {
  /**
   * The cluster's name. Every message travels as its frame and is read back as TCP's receiver
   * reads it (a frame of another cluster or not of the schema is dropped and counted), so what the
   * embedded mode and the simulator exercise is what goes over the wire. Default `shardherd`.
   */
  readonly cluster?: string;
  /** One way, per message. Default 1 ms. */
  readonly latencyMs?: number;
  /** A connect whose handshake cannot get through ends with `timeout` after this long. Default 1000 ms. */
  readonly connectTimeoutMs?: number;
  /** The fate of each message from endpoint `from` to endpoint `to` (addresses). Default: delivered. */
  readonly faults?: (from: string, to: string, message: DetectorMessage) => LinkFault;
  /**
   * Whether a connect from `from` to the live endpoint `to` is refused now, as a dead one's is
   * (a reset of the handshake). Default: never. `reset` among the `faults` ends a connection
   * instead: the message is lost and both ends hear `closed`, though both processes run.
   */
  readonly refuses?: (from: string, to: string) => boolean;
  /** Whether anything sent from `from` reaches `to` now: a partition, one direction at a time. Default: always. */
  readonly reachable?: (from: string, to: string) => boolean;
}

/** The process that owns a transport: whether it runs, is paused (SIGSTOP) or dead. */
export interface TransportOwner {
  readonly state: 'running' | 'paused' | 'dead';
  /** Resolves when the process runs (never if it is dead). */
  pass(): Promise<void>;
}

const RUNNING: TransportOwner = { state: 'running', pass: () => Promise.resolve() };

/** One end of a connection. */
class MemoryLink implements DetectorLink {
  peer: MemoryLink | undefined;
  private events: LinkEvents | undefined;
  private ended = false;
  /** Deliveries to this end run one after the other, each when its owner runs. */
  private chain: Promise<void> = Promise.resolve();
  /** When the last message to this end is delivered: a direction never reorders. */
  lastArrival = Number.NEGATIVE_INFINITY;
  /** The network reset this connection: nothing more travels on it, its ends hear `closed`. */
  reset = false;

  constructor(
    readonly transport: MemoryDetectorTransport,
    /** This end's address for faults and partitions (a transport that does not listen has a name of its own). */
    readonly address: string,
  ) {}

  get open(): boolean {
    return !this.ended;
  }

  get established(): boolean {
    return !this.ended && this.peer !== undefined;
  }

  attach(events: LinkEvents): void {
    this.events = events;
  }

  /** Messages sent before the handshake completed: sent then, as a socket's buffer would. */
  private pending: DetectorMessage[] | undefined = [];

  send(message: DetectorMessage): boolean {
    if (this.ended || this.transport.owner.state === 'dead') return false;
    if (this.pending) this.pending.push(message);
    else this.transport.network.carry(this, this.peer!, message);
    return true;
  }

  /** @internal The handshake completed: `peer` is the other end. */
  connected(peer: MemoryLink): void {
    this.peer = peer;
    const pending = this.pending ?? [];
    this.pending = undefined;
    if (!this.ended) for (const m of pending) this.transport.network.carry(this, peer, m);
  }

  close(): void {
    this.die();
    this.transport.forget(this);
  }

  /** Ends this side (closed, or its process died): the peer hears `closed`, as from a killed process's kernel. */
  die(): void {
    if (this.ended) return;
    this.ended = true;
    this.pending = undefined;
    if (this.peer) this.transport.network.hangUp(this, this.peer);
  }

  /** Runs `event` on this end when its owner runs, after everything before it. */
  hear(event: { kind: 'message'; message: DetectorMessage } | { kind: 'ended'; why: LinkEnd } | { kind: 'run'; fn: () => void }): void {
    const owner = this.transport.owner;
    this.chain = this.chain.then(async () => {
      await owner.pass();
      if (this.ended && event.kind !== 'run') return;
      if (event.kind === 'run') event.fn();
      else if (event.kind === 'message') this.events?.message(event.message);
      else {
        this.ended = true;
        this.transport.forget(this);
        this.events?.ended(event.why);
      }
    });
  }
}

export class MemoryDetectorTransport implements DetectorTransport {
  private accept: ((link: DetectorLink) => LinkEvents) | undefined;
  private addressValue: string | undefined;
  private readonly links = new Set<MemoryLink>();
  private closed = false;
  /** The name this transport's connections come from when it does not listen. */
  readonly clientName: string;

  constructor(
    readonly network: MemoryDetectorNetwork,
    readonly owner: TransportOwner,
    id: number,
    /** Counts the frames this endpoint's connections drop. */
    readonly dropped: DroppedFrames | undefined,
  ) {
    this.clientName = `mem-client-${id}`;
  }

  /** Where it listens, or its client name. */
  get address(): string {
    return this.addressValue ?? this.clientName;
  }

  listen(accept: (link: DetectorLink) => LinkEvents): Promise<string> {
    if (this.addressValue) return Promise.reject(new Error('the detector endpoint is already listening'));
    this.accept = accept;
    this.addressValue = this.network.register(this);
    return Promise.resolve(this.addressValue);
  }

  connect(address: string, events: LinkEvents): DetectorLink {
    const link = new MemoryLink(this, this.address);
    link.attach(events);
    if (this.closed || this.owner.state === 'dead') {
      link.close();
      return link;
    }
    this.links.add(link);
    this.network.open(link, address);
    return link;
  }

  /** @internal A connection reached this endpoint: its owner accepts it when it runs. */
  accepted(server: MemoryLink): void {
    this.links.add(server);
    server.hear({ kind: 'run', fn: () => server.attach(this.accept!(server)) });
  }

  /** @internal */
  forget(link: MemoryLink): void {
    this.links.delete(link);
  }

  /** @internal Whether a connect to this endpoint is refused: it is closed or its process died. */
  get refusing(): boolean {
    return this.closed || this.owner.state === 'dead';
  }

  close(): Promise<void> {
    this.closed = true;
    this.network.unregister(this);
    for (const link of [...this.links]) link.close();
    return Promise.resolve();
  }

  /** The process died: every peer hears its connections close, and connects to it are refused. */
  kill(): void {
    this.closed = true;
    this.network.unregister(this);
    for (const link of [...this.links]) link.die();
    this.links.clear();
  }
}

/** Every memory detector endpoint of one cluster. */
export class MemoryDetectorNetwork {
  private readonly endpoints = new Map<string, MemoryDetectorTransport>();
  private count = 0;
  private readonly latencyMs: number;
  private readonly connectTimeoutMs: number;

  constructor(
    private readonly clock: Clock,
    private readonly options: MemoryDetectorNetworkOptions = {},
  ) {
    this.latencyMs = options.latencyMs ?? 1;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 1000;
  }

  /** A transport for one node incarnation, whose deliveries wait while `owner` is paused; frames it drops are counted in `dropped`. */
  transport(owner: TransportOwner = RUNNING, dropped?: DroppedFrames): MemoryDetectorTransport {
    return new MemoryDetectorTransport(this, owner, ++this.count, dropped);
  }

  /** @internal */
  register(t: MemoryDetectorTransport): string {
    const address = `mem-${++this.count}`;
    this.endpoints.set(address, t);
    return address;
  }

  /** @internal */
  unregister(t: MemoryDetectorTransport): void {
    for (const [address, e] of this.endpoints) if (e === t) this.endpoints.delete(address);
  }

  private reachable(from: string, to: string): boolean {
    return this.options.reachable?.(from, to) ?? true;
  }

  /** @internal A handshake: refused when nothing listens, timed out when a direction is cut. */
  open(client: MemoryLink, address: string): void {
    this.clock.schedule(this.latencyMs, () => {
      if (!client.open) return;
      const endpoint = this.endpoints.get(address);
      if (!this.reachable(client.address, address) || (endpoint && !this.reachable(address, client.address))) {
        this.clock.schedule(Math.max(0, this.connectTimeoutMs - this.latencyMs), () => client.hear({ kind: 'ended', why: 'timeout' }));
        return;
      }
      if (!endpoint || endpoint.refusing || this.options.refuses?.(client.address, address) === true) {
        this.clock.schedule(this.latencyMs, () => client.hear({ kind: 'ended', why: 'refused' }));
        return;
      }
      const server = new MemoryLink(endpoint, address);
      server.connected(client);
      endpoint.accepted(server);
      client.connected(server);
    });
  }

  /** @internal `from` ended: `to` hears it closed (a FIN that a partition swallows, as any packet). */
  hangUp(from: MemoryLink, to: MemoryLink): void {
    if (!this.reachable(from.address, to.address)) return;
    const at = Math.max(this.clock.now() + this.latencyMs, to.lastArrival);
    to.lastArrival = at;
    this.clock.schedule(at - this.clock.now(), () => to.hear({ kind: 'ended', why: 'closed' }));
  }

  /** A reset of a live connection: the message is lost, and each end hears `closed` (after what was already on its way to it). */
  private resetLink(a: MemoryLink, b: MemoryLink): void {
    a.reset = true;
    b.reset = true;
    for (const end of [a, b]) {
      const at = Math.max(this.clock.now() + this.latencyMs, end.lastArrival);
      end.lastArrival = at;
      this.clock.schedule(at - this.clock.now(), () => end.hear({ kind: 'ended', why: 'closed' }));
    }
  }

  /** @internal One message, subject to partitions and faults, in order per direction. */
  carry(from: MemoryLink, to: MemoryLink, message: DetectorMessage): void {
    if (!this.reachable(from.address, to.address) || from.reset || to.reset) return;
    const fault = this.options.faults?.(from.address, to.address, message) ?? { kind: 'deliver' };
    if (fault.kind === 'drop') return;
    if (fault.kind === 'reset') {
      this.resetLink(from, to);
      return;
    }
    const at = Math.max(this.clock.now() + this.latencyMs + (fault.kind === 'delay' ? fault.ms : 0), to.lastArrival);
    to.lastArrival = at;
    const frame = encodeFrame(message);
    this.clock.schedule(at - this.clock.now(), () => {
      const parsed = parseFrame(frame.slice(0, -1), this.options.cluster ?? 'shardherd');
      if (parsed.ok) to.hear({ kind: 'message', message: parsed.value });
      else to.transport.dropped?.drop(parsed.error, from.address);
    });
  }
}
