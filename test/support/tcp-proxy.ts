// A TCP proxy on 127.0.0.1 that a test can cut and restore, to make a real server unreachable
// for a while without stopping it (the clients see connections reset and refused, as in an outage).
import net from 'node:net';

export class TcpProxy {
  private readonly sockets = new Set<net.Socket>();
  private cutOff = false;
  private constructor(private readonly server: net.Server) {}

  /** Forwards `127.0.0.1:<port>` to `target` (`host:port`). */
  static async start(target: string): Promise<TcpProxy> {
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
        client.pipe(upstream);
        upstream.pipe(client);
      }),
    );
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return proxy;
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
