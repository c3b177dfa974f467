// Whether any of the Kafka brokers a client was given accepts a connection. Once kafkajs has
// retried, "nothing listens there" (a wrong address, Kafka down, a firewall) and "Kafka answers but
// has no such cluster" end in the same timeout or in errors that name neither; a plain TCP
// connect tells them apart, so the error can say which of the two it was.
import { connect, type Socket } from 'node:net';

/**
 * How long the connection attempts after a failed Kafka call may take: a refused connection
 * answers at once, this bounds only an address that drops what is sent to it.
 */
export const PROBE_MS = 1_000;

/** `host` and `port` of `host:port` (`[::1]:9092` for IPv6). */
function hostAndPort(broker: string): { host: string; port: number } | undefined {
  const colon = broker.lastIndexOf(':');
  const port = Number(broker.slice(colon + 1));
  if (colon <= 0 || !Number.isInteger(port) || port <= 0 || port > 65_535) return undefined;
  return { host: broker.slice(0, colon).replace(/^\[(.*)\]$/, '$1'), port };
}

/**
 * Resolves true as soon as one of the brokers accepts a TCP connection, false when every one
 * refused or failed or `timeoutMs` passed. Every socket is closed again.
 */
export function anyBrokerAccepts(brokers: readonly string[], timeoutMs = PROBE_MS): Promise<boolean> {
  const addresses = brokers.map(hostAndPort).filter((a) => a !== undefined);
  if (addresses.length === 0) return Promise.resolve(false);
  return new Promise((resolve) => {
    const sockets: Socket[] = [];
    let failed = 0;
    let done = false;
    const finish = (accepted: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      for (const s of sockets) s.destroy();
      resolve(accepted);
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    timer.unref();
    for (const { host, port } of addresses) {
      const socket = connect({ host, port });
      sockets.push(socket);
      socket.unref();
      socket.once('connect', () => finish(true));
      socket.once('error', () => {
        failed += 1;
        if (failed === addresses.length) finish(false);
      });
    }
  });
}

/**
 * No broker of `brokers` accepted a connection: Kafka is not running there, the addresses are
 * wrong, or the network does not let this process through. `cause` is what the Kafka call failed with.
 */
export class BrokersUnreachableError extends Error {
  constructor(
    readonly brokers: readonly string[],
    /** What names the brokers for the person who set them: `kafka.brokers of node.json`, `the client's brokers`. */
    origin: string,
    cause: unknown,
  ) {
    super(`no Kafka broker could be reached at ${brokers.join(', ')} (${origin}): is Kafka running there, and are the addresses right?${causeText(cause)}`, {
      cause,
    });
    this.name = 'BrokersUnreachableError';
  }
}

function causeText(cause: unknown): string {
  if (cause === undefined) return '';
  return ` (${cause instanceof Error ? cause.message : String(cause)})`;
}

/**
 * Runs a Kafka call; when it fails and no broker accepts a connection (tried once more now), the
 * failure becomes a `BrokersUnreachableError` naming the brokers and `origin`. Any other failure
 * passes unchanged.
 */
export async function explainUnreachableBrokers<T>(brokers: readonly string[], origin: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    if (e instanceof BrokersUnreachableError || (await anyBrokerAccepts(brokers))) throw e;
    throw new BrokersUnreachableError(brokers, origin, e);
  }
}
