// A TCP proxy on 127.0.0.1 that a test can cut and restore, to make a real server unreachable
// for a while without stopping it (the clients see connections reset and refused, as in an outage),
// or slow down: `delayMs` holds every chunk that long in each direction, in order (a slow network
// or a slow server, as the clients see it).
import net from 'node:net';

export class TcpProxy {
  private readonly sockets = new Set<net.Socket>();
  private cutOff = false;
  /** Added to every chunk, each way, on connections opened from then on. */
  delayMs = 0;
  private constructor(private readonly server: net.Server) {}

  /** Forwards `127.0.0.1:<port>` to `target` (`host:port`), each chunk held `delayMs` each way. */
  static async start(target: string, options: { readonly delayMs?: number } = {}): Promise<TcpProxy> {
    const [host, port] = target.split(':');
    const proxy: TcpProxy = new TcpProxy(
      net.createServer((client) => {
        if (proxy.cutOff) {
          client.destroy();
          return;
        }
        const upstream = net.connect(Number(port), host);
        for (const s of [client, upstream]) {
          proxy.sockets.add(s);
          s.on('error', () => undefined);
          s.on('close', () => {
            proxy.sockets.delete(s);
            client.destroy();
            upstream.destroy();
          });
        }
        proxy.forward(client, upstream);
        proxy.forward(upstream, client);
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
    return `127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
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
}
