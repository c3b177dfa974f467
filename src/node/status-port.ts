// The node's status endpoint (`status.host`, `status.port`) taken before the node connects to
// anything: a port another process holds is found before the node joins the cluster (so nothing
// in the cluster changed), and is reported naming the config key, not as a bare EADDRINUSE.
import { holdHttpPort, type HeldHttpPort } from '../http/held-port.js';
import { NodeConfigError } from './node-config.js';

/** Why the listen failed, in words, by the OS's error code; the key the fix is in. */
const REASONS: Readonly<Record<string, { readonly key: 'status.port' | 'status.host'; readonly why: string }>> = {
  EADDRINUSE: { key: 'status.port', why: 'is in use by another process' },
  EACCES: { key: 'status.port', why: 'needs privileges this process does not have (ports below 1024)' },
  EADDRNOTAVAIL: { key: 'status.host', why: 'is not an address of this machine' },
  ENOTFOUND: { key: 'status.host', why: 'does not resolve to an address' },
  EAI_AGAIN: { key: 'status.host', why: 'could not be resolved (DNS did not answer)' },
};

/** The status endpoint could not be listened on: names the key (`status.port` or `status.host`) and host:port. */
export class StatusPortError extends NodeConfigError {
  constructor(
    key: 'status.port' | 'status.host',
    readonly host: string,
    readonly port: number,
    /** The OS's error code (EADDRINUSE, EACCES, ...). */
    readonly code: string,
    why: string,
    source: string,
  ) {
    super(
      key,
      `${key === 'status.port' ? port : host}: cannot listen on ${host}:${port}, which ${why} (${code}); the node did not start and did not join the cluster`,
      source,
    );
    this.name = 'StatusPortError';
  }
}

/** Listens on the config's status endpoint at once; a failure the config can fix is a `StatusPortError`. */
export async function holdStatusPort(status: { readonly host: string; readonly port: number }, source = 'config'): Promise<HeldHttpPort> {
  try {
    return await holdHttpPort(status.host, status.port);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const reason = code === undefined ? undefined : REASONS[code];
    if (code === undefined || reason === undefined) throw e;
    throw new StatusPortError(reason.key, status.host, status.port, code, reason.why, source);
  }
}
