// Refusals and resets from live processes on the detector's network: for a while, a node's
// endpoint refuses connects from another node and resets a connection as soon as that node sends
// on it, though both processes run (a full accept queue, a proxy or a kernel resetting
// connections). One direction at a time; both ways is two of them. The detector reads a refusal
// or a closed connection as the strong signal of a dead process (docs/ARCHITECTURE.md §11.3): this
// is where that reading is wrong.
import type { SimulatedClock } from '../cluster/clock.js';
import type { MemoryDetectorNetworkOptions } from '../cluster/failure-detector/memory-transport.js';

interface Window {
  readonly from: string;
  readonly to: string;
  readonly start: number;
  readonly end: number;
}

export class LinkResets {
  private readonly windows: Window[] = [];

  constructor(private readonly clock: SimulatedClock) {}

  /** For `ms` from now, `to`'s endpoint refuses `from`'s connects and resets `from`'s connections when `from` sends on them. */
  add(from: string, to: string, ms: number): void {
    const now = this.clock.now();
    this.windows.push({ from, to, start: now, end: now + ms });
  }

  /** Whether `to` refuses and resets `from` now. */
  active(from: string, to: string): boolean {
    const now = this.clock.now();
    return this.windows.some((w) => w.from === from && w.to === to && w.start <= now && now < w.end);
  }

  /** `inner`'s network options (addresses resolved to nodes by `nodeOf`) with these refusals and resets on top. */
  networkOptions(nodeOf: (address: string) => string | undefined, inner: MemoryDetectorNetworkOptions): MemoryDetectorNetworkOptions {
    const hit = (fromAddress: string, toAddress: string) => {
      if (this.windows.length === 0) return false;
      const from = nodeOf(fromAddress);
      const to = nodeOf(toAddress);
      return from !== undefined && to !== undefined && this.active(from, to);
    };
    return {
      ...inner,
      faults: (from, to, message) => (hit(from, to) ? { kind: 'reset' } : (inner.faults?.(from, to, message) ?? { kind: 'deliver' })),
      refuses: (from, to) => hit(from, to) || (inner.refuses?.(from, to) ?? false),
    };
  }
}
