// A TCP proxy on 127.0.0.1 that a test can turn into a bad network in front of a real server,
// without stopping the server:
// - `cut()` resets every connection and refuses new ones until `restore()` (an outage);
// - `reset()` resets every open connection once and keeps accepting (a middlebox dropping state);
// - `hold()` forwards nothing either way until `release()`, then delivers what waited, in order (a
//   blackhole that heals: TCP retransmits, so nothing is lost, only late; the clients see silence);
// - `delayMs` holds every chunk that long in each direction, in order (a slow network or a slow
//   server); `delayFor(tag, ms)` slows only the connections tagged `tag` (below), on top;
// - for a protocol of newline-delimited frames (the failure detector's), `dropFrame` can drop
//   single frames, as a lossy network would lose single messages.
// Delays and holds apply at once to open connections too; a chunk never overtakes an earlier one.
import net from 'node:net';

export interface TcpProxyOptions {
  /**
   * Called for every newline-delimited frame (without its newline), `toServer` for the client's
   * frames; true drops it. Absent: bytes are forwarded as they come, unframed.
   */
  readonly dropFrame?: (frame: string, toServer: boolean) => boolean;
  /** Initial `delayMs`. */
  readonly delayMs?: number;
  /**
   * Names a connection from the first bytes its client sent (e.g. the sending node of a detector
   * frame), so that `delayFor` can slow one peer's connections only.
   */
  readonly tagOf?: (firstClientBytes: string) => string | undefined;
}

interface Connection {
  tag: string | undefined;
  readonly sockets: readonly net.Socket[];
}

/** One direction of a connection: chunks wait here until their time comes and the proxy is not holding. */
interface Lane {
  readonly to: net.Socket;
  readonly queue: { due: number; chunk: Buffer | 'end' }[];
  timer: NodeJS.Timeout | undefined;
}

export class TcpProxy {
  private readonly connections = new Set<Connection>();
  private readonly lanes = new Set<Lane>();
  private readonly tagDelays = new Map<string, number>();
  private cutOff = false;
  private holding = false;
  /** Frames forwarded and dropped (with `dropFrame` only). */
  readonly frames = { forwarded: 0, dropped: 0 };
  /** Added to every chunk, each way, on every connection (open ones included). */
  delayMs = 0;
  private constructor(
    private readonly server: net.Server,
    private readonly options: TcpProxyOptions,
  ) {}

  /** Forwards `127.0.0.1:<port>` to `target` (`host:port`). */
  static async start(target: string, options: TcpProxyOptions = {}): Promise<TcpProxy> {
    const [host, port] = target.split(':');
    const proxy: TcpProxy = new TcpProxy(
      net.createServer({ noDelay: true }, (client) => {
        if (proxy.cutOff) {
          client.resetAndDestroy();
          return;
        }
        const upstream = net.connect({ port: Number(port), host: host!, noDelay: true });
        const conn: Connection = { tag: undefined, sockets: [client, upstream] };
        proxy.connections.add(conn);
        for (const s of conn.sockets) {
          s.on('error', () => undefined);
          s.on('close', () => {
            proxy.connections.delete(conn);
            client.destroy();
            upstream.destroy();
          });
        }
        proxy.forward(conn, client, upstream, true);
        proxy.forward(conn, upstream, client, false);
      }),
      options,
    );
    proxy.delayMs = options.delayMs ?? 0;
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** Slows the connections tagged `tag` (see `tagOf`) by `ms` more, each way; 0 ends it. */
  delayFor(tag: string, ms: number): void {
    if (ms === 0) this.tagDelays.delete(tag);
    else this.tagDelays.set(tag, ms);
  }

  /** Resets every open connection and refuses new ones until `restore`. */
  cut(): void {
    this.cutOff = true;
    this.reset();
  }

  restore(): void {
    this.cutOff = false;
  }

  /** Resets (RST) every open connection now; new ones are accepted as before. */
  reset(): void {
    for (const c of this.connections) for (const s of c.sockets) if (!s.destroyed) s.resetAndDestroy();
  }

  /** Forwards nothing, either way, until `release` (connections stay open; new ones are accepted and wait too). */
  hold(): void {
    this.holding = true;
  }

  /** Delivers what waited during `hold`, in order, and forwards again. */
  release(): void {
    this.holding = false;
    for (const lane of this.lanes) this.pump(lane);
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private delayOf(conn: Connection): number {
    return this.delayMs + (conn.tag === undefined ? 0 : (this.tagDelays.get(conn.tag) ?? 0));
  }

  /** `from` → `to` through a lane: each chunk (or whole frame, with `dropFrame`) is due `delayOf` after it came, never before the one ahead of it. */
  private forward(conn: Connection, from: net.Socket, to: net.Socket, toServer: boolean): void {
    const lane: Lane = { to, queue: [], timer: undefined };
    this.lanes.add(lane);
    to.once('close', () => {
      this.lanes.delete(lane);
      if (lane.timer) clearTimeout(lane.timer);
    });
    const enqueue = (chunk: Buffer | 'end') => {
      const due = Math.max(performance.now() + this.delayOf(conn), lane.queue.at(-1)?.due ?? 0);
      lane.queue.push({ due, chunk });
      this.pump(lane);
    };
    const dropFrame = this.options.dropFrame;
    let pending: Buffer = Buffer.alloc(0);
    let first = true;
    from.on('data', (chunk: Buffer) => {
      if (first && toServer) conn.tag = this.options.tagOf?.(chunk.toString('utf8'));
      first = false;
      if (!dropFrame) {
        enqueue(chunk);
        return;
      }
      // Whole frames only; a partial frame waits for its newline.
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      const kept: Buffer[] = [];
      let start = 0;
      for (let nl = pending.indexOf(10, start); nl !== -1; nl = pending.indexOf(10, start)) {
        const frame = pending.subarray(start, nl + 1);
        start = nl + 1;
        if (dropFrame(frame.toString('utf8', 0, frame.length - 1), toServer)) this.frames.dropped += 1;
        else {
          this.frames.forwarded += 1;
          kept.push(frame);
        }
      }
      pending = pending.subarray(start);
      if (kept.length > 0) enqueue(kept.length === 1 ? kept[0]! : Buffer.concat(kept));
    });
    from.on('end', () => enqueue('end'));
  }

  /** Writes the lane's chunks that are due (unless holding), and sets a timer for the next one. */
  private pump(lane: Lane): void {
    if (lane.timer) {
      clearTimeout(lane.timer);
      lane.timer = undefined;
    }
    if (this.holding) return;
    const now = performance.now();
    while (lane.queue.length > 0 && lane.queue[0]!.due <= now) {
      const { chunk } = lane.queue.shift()!;
      if (lane.to.destroyed) continue;
      if (chunk === 'end') lane.to.end();
      else lane.to.write(chunk);
    }
    const next = lane.queue[0];
    if (next) lane.timer = setTimeout(() => this.pump(lane), Math.max(1, Math.ceil(next.due - now)));
  }
}
