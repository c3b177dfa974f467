// When this node last heard from the singleton: any record of the current singleton on the events
// or replies topic (its digest comes every `publishIntervalMs` even when nothing changes). What
// `/healthz` reads to say whether a singleton answers, with no request of its own on the bus.

export class SingletonContact {
  private lastAt: number | undefined;

  /** A record of the singleton arrived (the node's clock). */
  heard(at: number): void {
    this.lastAt = at;
  }

  /** How long since the last one; undefined when none came yet. */
  silentMs(now: number): number | undefined {
    return this.lastAt === undefined ? undefined : Math.max(0, now - this.lastAt);
  }
}
