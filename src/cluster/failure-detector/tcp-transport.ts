// The failure detector over plain TCP (docs/ARCHITECTURE.md §11.3): newline-delimited JSON frames,
// Nagle off, one socket per link. How a socket ends is reported as what it means: a refused connect
// or a socket the other side closed says that nothing listens there any more (a crashed process's
// kernel closes its sockets at once); a network error or a connect that never completes says nothing.
import { createServer, connect as tcpConnect, type Server, type Socket } from 'node:net';
import type { DroppedFrames } from './dropped.js';
import { encodeFrame, parseFrame, type DetectorMessage } from './messages.js';
import { FrameReader } from './frame-reader.js';
import type { DetectorLink, DetectorTransport, LinkEnd, LinkEvents } from './transport.js';

export interface TcpTransportOptions {
  /** The cluster's name: frames of another are dropped. */
  readonly cluster: string;
  /** Where the endpoint listens. Default 127.0.0.1, port 0 (an ephemeral port). */
  readonly host?: string | undefined;
  readonly port?: number | undefined;
  /** The host others are told to connect to. Default `host`. */
  readonly advertisedHost?: string | undefined;
  /** The port others are told to connect to (a proxy or NAT forwards it to the bound one). Default the bound port. */
  readonly advertisedPort?: number | undefined;
  /** A connect that has not completed by then ends with `timeout`. Default 1000 ms. */
  readonly connectTimeoutMs?: number | undefined;
  /** Counts (and reports once per cause) the frames dropped on every connection. */
  readonly dropped: DroppedFrames;
}

/** Bytes queued on a socket beyond which a message is dropped rather than queued: the peer is not reading. */
const MAX_QUEUED_BYTES = 64 * 1024;

/** `host:port`, with an IPv6 host in brackets. */
export function parseAddress(address: string): { host: string; port: number } {
  const m = /^(?:\[([^\]\s]+)\]|([^\s:[\]]+)):(\d{1,5})$/.exec(address);
  const port = m ? Number(m[3]) : NaN;
  if (!m || !(port >= 0 && port <= 65535)) throw new RangeError(`not a detector address (host:port): ${JSON.stringify(address)}`);
  return { host: (m[1] ?? m[2])!, port };
}

const formatAddress = (host: string, port: number) => (host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`);

/** What a socket error means for the detector. */
function endOf(error: NodeJS.ErrnoException, connected: boolean): LinkEnd {
  if (error.code === 'ECONNREFUSED') return 'refused';
  // A connected socket the peer resets: its process died (or closed it); before connecting, a reset is the network's.
  if (connected && (error.code === 'ECONNRESET' || error.code === 'EPIPE')) return 'closed';
  return 'error';
}

class TcpLink implements DetectorLink {
  private events: LinkEvents | undefined;
  private ended = false;
  private connected: boolean;
  private readonly reader = new FrameReader();
  private connectTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly socket: Socket,
    private readonly options: TcpTransportOptions,
    private readonly onGone: (link: TcpLink) => void,
    connected: boolean,
  ) {
    this.connected = connected;
    socket.setNoDelay(true);
    if (!connected) {
      this.connectTimer = setTimeout(() => this.end('timeout'), options.connectTimeoutMs ?? 1000);
      this.connectTimer.unref();
      socket.once('connect', () => {
        this.connected = true;
        clearTimeout(this.connectTimer);
      });
    }
    socket.on('data', (bytes: Buffer) => this.read(bytes));
    socket.on('error', (e: NodeJS.ErrnoException) => this.end(endOf(e, this.connected)));
    // After 'error' Node emits 'close' too: the first one decides.
    socket.on('close', () => this.end(this.connected ? 'closed' : 'error'));
    socket.on('end', () => this.end('closed'));
  }

  attach(events: LinkEvents): void {
    this.events = events;
  }

  get open(): boolean {
    return !this.ended;
  }

  get established(): boolean {
    return !this.ended && this.connected;
  }

  send(message: DetectorMessage): boolean {
    if (this.ended || this.socket.writableLength > MAX_QUEUED_BYTES) return false;
    this.socket.write(encodeFrame(message));
    return true;
  }

  close(): void {
    if (this.ended) return;
    this.ended = true;
    this.dispose();
  }

  private read(bytes: Buffer): void {
    for (const chunk of this.reader.push(bytes)) {
      if (this.ended) return;
      if (chunk.kind === 'too-large') {
        // The stream cannot be cut into frames any more: the connection goes.
        this.options.dropped.drop({ cause: 'too-large', detail: `a frame of at least ${chunk.bytes} bytes` }, this.peer());
        this.end('error');
        return;
      }
      const parsed = parseFrame(chunk.text, this.options.cluster);
      if (parsed.ok) this.events?.message(parsed.value);
      else this.options.dropped.drop(parsed.error, this.peer());
    }
  }

  private peer(): string {
    return `${this.socket.remoteAddress ?? '?'}:${this.socket.remotePort ?? '?'}`;
  }

  private end(why: LinkEnd): void {
    if (this.ended) return;
    this.ended = true;
    this.dispose();
    this.events?.ended(why);
  }

  private dispose(): void {
    clearTimeout(this.connectTimer);
    this.socket.destroy();
    this.onGone(this);
  }
}

export class TcpDetectorTransport implements DetectorTransport {
  private server: Server | undefined;
  private readonly links = new Set<TcpLink>();
  private closed = false;

  constructor(private readonly options: TcpTransportOptions) {}

  async listen(accept: (link: DetectorLink) => LinkEvents): Promise<string> {
    if (this.server) throw new Error('the detector endpoint is already listening');
    const host = this.options.host ?? '127.0.0.1';
    const server = createServer({ noDelay: true }, (socket) => {
      if (this.closed) {
        socket.destroy();
        return;
      }
      const link = this.track(new TcpLink(socket, this.options, (l) => this.links.delete(l), true));
      link.attach(accept(link));
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.options.port ?? 0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const bound = server.address();
    const port = typeof bound === 'object' && bound ? bound.port : (this.options.port ?? 0);
    return formatAddress(this.options.advertisedHost ?? host, this.options.advertisedPort ?? port);
  }

  connect(address: string, events: LinkEvents): DetectorLink {
    const { host, port } = parseAddress(address);
    const link = new TcpLink(tcpConnect({ host, port, noDelay: true }), this.options, (l) => this.links.delete(l), false);
    link.attach(events);
    if (this.closed) link.close();
    return this.track(link);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const link of [...this.links]) link.close();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private track(link: TcpLink): TcpLink {
    if (link.open) this.links.add(link);
    return link;
  }
}
