// What a node serves to clients: one `DatasetServer` per dataset the application registered a
// handler for, opened with each incarnation and closed with it, and the endpoint records that tell
// clients where they are (announced when opened and whenever a client says hello, withdrawn on a
// graceful stop; a crash withdraws nothing: clients find the port closed and fail over).
import type { Logger } from 'pino';
import type { Bus, BusSubscription } from '../cluster/bus.js';
import type { DatasetRef, Incarnation, NodeId } from '../core/ids.js';
import { checkedMaxInFlight, DatasetServer, type DatasetServerOptions, type ServingNode, type ShardRequestHandler } from './dataset-server.js';
import { endpointRecord, parseEndpointsRecord, withdrawnRecord, type Endpoint } from '../protocol/routed-wire.js';

export interface NodeServingParams {
  readonly bus: Bus;
  readonly topic: string;
  readonly node: NodeId;
  readonly servingNode: ServingNode;
  readonly log: Logger;
}

/** The incarnation the servers belong to, with its bus group and its rack. */
export interface ServingIncarnation {
  readonly incarnation: Incarnation;
  readonly group: string;
  readonly rack: string | undefined;
}

export class NodeServing {
  private readonly handlers = new Map<DatasetRef, { handler: ShardRequestHandler; options: DatasetServerOptions }>();
  private readonly servers = new Map<DatasetRef, DatasetServer>();
  private current: ServingIncarnation | undefined;
  private subscription: Promise<BusSubscription> | undefined;

  constructor(private readonly p: NodeServingParams) {}

  /** The address a dataset is served at by the current incarnation, if it is. */
  urlOf(dataset: DatasetRef): string | undefined {
    return this.servers.get(dataset)?.url;
  }

  /** Registers (or replaces) a dataset's handler; opens its server now if the node runs. */
  async serve(dataset: DatasetRef, handler: ShardRequestHandler, options: DatasetServerOptions): Promise<void> {
    // Refused at registration, not when a later start opens the server.
    checkedMaxInFlight(options);
    this.handlers.set(dataset, { handler, options });
    const old = this.servers.get(dataset);
    this.servers.delete(dataset);
    await old?.close();
    if (this.current) await this.open(this.current, dataset);
  }

  /** A new incarnation runs: every registered dataset gets its server, and clients hear of them. */
  async started(incarnation: ServingIncarnation): Promise<void> {
    this.current = incarnation;
    for (const dataset of this.handlers.keys()) await this.open(incarnation, dataset);
  }

  /**
   * The incarnation ends. Graceful: endpoints withdrawn first, so clients stop asking before the
   * ports close. Not graceful (a crash): the ports just close.
   */
  async stopped(graceful: boolean): Promise<void> {
    const incarnation = this.current;
    this.current = undefined;
    const servers = [...this.servers];
    this.servers.clear();
    const subscription = this.subscription;
    this.subscription = undefined;
    if (graceful && incarnation) {
      await Promise.all(
        servers.map(([dataset]) =>
          this.p.bus.produce(this.p.topic, withdrawnRecord({ node: this.p.node, incarnation: incarnation.incarnation, dataset })).catch(() => undefined),
        ),
      );
    }
    await Promise.all(servers.map(([, server]) => server.close()));
    await subscription?.then((s) => s.close()).catch(() => undefined);
  }

  private async open(incarnation: ServingIncarnation, dataset: DatasetRef): Promise<void> {
    const { handler, options } = this.handlers.get(dataset)!;
    const server = await DatasetServer.open(dataset, handler, this.p.servingNode, options);
    if (this.current !== incarnation) return void (await server.close());
    this.servers.set(dataset, server);
    // Hellos are heard once the node serves anything: a node without handlers reads nothing more.
    this.subscription ??= this.p.bus.subscribe(this.p.topic, incarnation.group, (record) => {
      const parsed = parseEndpointsRecord(record.value);
      if (parsed.ok && parsed.value.kind === 'hello') return this.announceAll(incarnation);
    });
    await this.subscription;
    await this.announce(incarnation, dataset, server.url);
  }

  private async announceAll(incarnation: ServingIncarnation): Promise<void> {
    if (this.current !== incarnation) return;
    for (const [dataset, server] of this.servers) await this.announce(incarnation, dataset, server.url);
  }

  private async announce(incarnation: ServingIncarnation, dataset: DatasetRef, url: string): Promise<void> {
    const endpoint: Endpoint = {
      node: this.p.node,
      incarnation: incarnation.incarnation,
      dataset,
      url,
      ...(incarnation.rack === undefined ? {} : { rack: incarnation.rack }),
    };
    await this.p.bus
      .produce(this.p.topic, endpointRecord(endpoint))
      .catch((e: unknown) => this.p.log.warn({ err: e, dataset }, 'announcing an endpoint failed; a client asks again when it lacks it'));
  }
}
