// Which protocol versions a broker serves, asked on a plain socket (ApiVersions v0, which every
// Kafka answers): the tests use it to tell which Kafka line they run against, whoever started it.
// Kafka 4.0 removed the oldest versions of many requests (KIP-896): Fetch below v4 among them (it
// still lists Produce from v0, for old clients' sake).
import { Socket } from 'node:net';

export interface ApiVersionRange {
  readonly min: number;
  readonly max: number;
}

const API_VERSIONS_KEY = 18;
/** Kafka's request key of Fetch. */
export const FETCH_KEY = 1;

/** The versions the broker at `hostPort` serves, by request key. */
export async function apiVersions(hostPort: string, timeoutMs = 10_000): Promise<ReadonlyMap<number, ApiVersionRange>> {
  const [host, port] = splitHostPort(hostPort);
  const clientId = Buffer.from('shardherd-tests');
  // size, then header v1 (key, version, correlation id, client id) and an empty v0 body.
  const request = Buffer.alloc(4 + 2 + 2 + 4 + 2 + clientId.length);
  request.writeInt32BE(request.length - 4, 0);
  request.writeInt16BE(API_VERSIONS_KEY, 4);
  request.writeInt16BE(0, 6);
  request.writeInt32BE(1, 8);
  request.writeInt16BE(clientId.length, 12);
  clientId.copy(request, 14);
  const response = await exchange(host, port, request, timeoutMs);
  // correlation id, error code, then [key, min, max] entries.
  const errorCode = response.readInt16BE(4);
  if (errorCode !== 0) throw new Error(`ApiVersions from ${hostPort} failed with error code ${errorCode}`);
  const count = response.readInt32BE(6);
  const versions = new Map<number, ApiVersionRange>();
  for (let i = 0, at = 10; i < count; i++, at += 6) {
    versions.set(response.readInt16BE(at), { min: response.readInt16BE(at + 2), max: response.readInt16BE(at + 4) });
  }
  return versions;
}

function splitHostPort(hostPort: string): [string, number] {
  const at = hostPort.lastIndexOf(':');
  return [hostPort.slice(0, at), Number(hostPort.slice(at + 1))];
}

/** Sends one request and resolves with the one size-prefixed response's payload. */
function exchange(host: string, port: number, request: Buffer, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = new Socket();
    let received = Buffer.alloc(0);
    const fail = (e: Error) => {
      socket.destroy();
      reject(e);
    };
    socket.setTimeout(timeoutMs, () => fail(new Error(`no ApiVersions answer from ${host}:${port} within ${timeoutMs} ms`)));
    socket.on('error', fail);
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 4 || received.length < 4 + received.readInt32BE(0)) return;
      socket.destroy();
      resolve(received.subarray(4, 4 + received.readInt32BE(0)));
    });
    socket.connect(port, host, () => socket.write(request));
  });
}
