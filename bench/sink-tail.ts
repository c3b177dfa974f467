// What each node's JSON-lines sink has taken so far, read from outside the nodes: the new lines of
// each file at every `read()` (from where the last read stopped, so a long run does not read its
// files again and again), counted per node and shard, with the highest offset each node wrote
// per shard and every record number seen (for the check that nothing acknowledged was lost).
import { open } from 'node:fs/promises';

export interface SinkCounts {
  /** Lines per node since the start. */
  readonly lines: ReadonlyMap<string, number>;
  /** Per node, per shard: the highest offset written (-1: none). */
  readonly highest: ReadonlyMap<string, readonly number[]>;
}

export class SinkTail {
  readonly seen = new Set<number>();
  private readonly position = new Map<string, number>();
  private readonly partial = new Map<string, string>();
  private readonly lines = new Map<string, number>();
  private readonly highest = new Map<string, number[]>();

  constructor(
    private readonly pathOf: (node: string) => string,
    private readonly nodes: readonly string[],
    private readonly shards: number,
  ) {
    for (const n of nodes) {
      this.lines.set(n, 0);
      this.highest.set(n, new Array<number>(shards).fill(-1));
    }
  }

  /** Reads what was appended since the last call; returns the counts so far. */
  async read(): Promise<SinkCounts> {
    for (const node of this.nodes) await this.readNode(node);
    return { lines: new Map(this.lines), highest: new Map([...this.highest].map(([n, h]) => [n, [...h]])) };
  }

  private async readNode(node: string): Promise<void> {
    const file = await open(this.pathOf(node), 'r').catch(() => undefined);
    if (!file) return;
    try {
      const from = this.position.get(node) ?? 0;
      const { size } = await file.stat();
      if (size <= from) return;
      const buffer = Buffer.alloc(size - from);
      const { bytesRead } = await file.read(buffer, 0, buffer.length, from);
      this.position.set(node, from + bytesRead);
      const text = (this.partial.get(node) ?? '') + buffer.subarray(0, bytesRead).toString('utf8');
      const parts = text.split('\n');
      // The last part is a line still being written (or empty after a newline): kept for the next read.
      this.partial.set(node, parts.pop()!);
      const highest = this.highest.get(node)!;
      for (const line of parts) {
        if (line === '') continue;
        const { shard, offset, value } = JSON.parse(line) as { shard: number; offset: number; value: { n: number } };
        this.lines.set(node, this.lines.get(node)! + 1);
        if (offset > highest[shard]!) highest[shard] = offset;
        this.seen.add(value.n);
      }
    } finally {
      await file.close();
    }
  }
}
