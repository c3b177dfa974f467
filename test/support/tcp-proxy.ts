// A TCP proxy on 127.0.0.1 that a test can cut and restore, to make a real server unreachable
// for a while without stopping it (the clients see connections reset and refused, as in an outage),
// or slow down: `delayMs` holds every chunk that long in each direction, in order (a slow network
// or a slow server, as the clients see it). For a protocol of newline-delimited frames (the failure
// detector's) it can also drop single frames, as a lossy network would lose single messages:
// `dropFrame` decides for each one.
import net from 'node:net';

export interface TcpProxyOptions {
  /**
   * Called for every newline-delimited frame (without its newline), `toServer` for the client's
   * frames; true drops it. Absent: bytes are forwarded as they come, unframed.
   */
  readonly dropFrame?: (frame: string, toServer: boolean) => boolean;
  /** Initial `delayMs`. */
  readonly delayMs?: number;
}

export class TcpProxy {
  private readonly sockets = new Set<net.Socket>();
  private cutOff = false;
  /** Frames forwarded and dropped (with `dropFrame` only). */
  readonly frames = { forwarded: 0, dropped: 0 };
  /** Added to every chunk, each way, on connections opened from then on (not with `dropFrame`). */
  delayMs = 0;
  private constructor(private readonly server: net.Server) {}

  /** Forwards `127.0.0.1:<port>` to `target` (`host:port`). */
  static async start(target: string, options: TcpProxyOptions = {}): Promise<TcpProxy> {
    const [host, port] = target.split(':');
    const proxy: TcpProxy = new TcpProxy(
      net.createServer({ noDelay: true }, (client) => {
        if (proxy.cutOff) {
          client.destroy();
          return;
        }
        const upstream = net.connect({ port: Number(port), host: host!, noDelay: true });
        for (const s of [client, upstream]) {
          proxy.sockets.add(s);
          s.on('error', () => undefined);
          s.on('close', () => {
            proxy.sockets.delete(s);
            client.destroy();
            upstream.destroy();
          });
        }
        const dropFrame = options.dropFrame;
        if (dropFrame) {
          proxy.forwardFrames(client, upstream, (f) => dropFrame(f, true));
          proxy.forwardFrames(upstream, client, (f) => dropFrame(f, false));
        } else {
          proxy.forward(client, upstream);
          proxy.forward(upstream, client);
        }
      }),
    );
    proxy.delayMs = options.delayMs ?? 0;
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  /** `from` → `to`, each chunk after `delayMs` (its own timer; timers of equal delay fire in order). */
  private forward(from: net.Socket, to: net.Socket): void {
    if (this.delayMs === 0) {
      from.pipe(to);
      return;
    }
    from.on('data', (chunk: Buffer) => {
      setTimeout(() => {
        if (!to.destroyed) to.write(chunk);
      }, this.delayMs);
    });
    from.on('end', () => setTimeout(() => to.end(), this.delayMs));
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** Resets every open connection and refuses new ones until `restore`. */
  cut(): void {
    this.cutOff = true;
    for (const s of this.sockets) s.destroy();
  }

  restore(): void {
    this.cutOff = false;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Copies whole frames from `from` to `to`, leaving out those `drop` picks; a partial frame waits for its newline. */
  private forwardFrames(from: net.Socket, to: net.Socket, drop: (frame: string) => boolean): void {
    let pending: Buffer = Buffer.alloc(0);
    from.on('data', (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      const kept: Buffer[] = [];
      let start = 0;
      for (let nl = pending.indexOf(10, start); nl !== -1; nl = pending.indexOf(10, start)) {
        const frame = pending.subarray(start, nl + 1);
        start = nl + 1;
        if (drop(frame.toString('utf8', 0, frame.length - 1))) this.frames.dropped += 1;
        else {
          this.frames.forwarded += 1;
          kept.push(frame);
        }
      }
      pending = pending.subarray(start);
      if (kept.length > 0 && !to.destroyed) to.write(kept.length === 1 ? kept[0]! : Buffer.concat(kept));
    });
  }
}
