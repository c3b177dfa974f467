// Reads what every member ingests (`nodeIngestion`) and turns two readings into rates: per copy its
// records per second and lag, per node their sums. The nodes of this process are read directly;
// another node over HTTP at the address it announced (`${address}/api/v1/node/ingestion`), which a
// node's config sets to its HTTP URL. A node without such an address, or that does not answer in
// time, is shown as such instead of as idle.
import type { ShardherdNode } from '../actors/node-process.js';
import { localNodes } from '../embedded/local-nodes.js';
import { nodeIngestion, type NodeIngestion } from './node-ingestion.js';

export interface SampledMember {
  readonly node: string;
  readonly incarnation: string;
  readonly address?: string;
}

/** One copy as last sampled. */
export interface CopySample {
  readonly node: string;
  readonly position: number;
  /** Records per second since the reading before (absent on a first reading). */
  readonly ratePerSec?: number;
  readonly lag?: number;
  readonly at: number;
}

export type NodeSampleState = 'ok' | 'unreachable' | 'no-address' | 'untracked';

/** One node as last sampled: its copies' sums. */
export interface NodeSample {
  readonly node: string;
  readonly state: NodeSampleState;
  /** Why it could not be read (`unreachable`). */
  readonly reason?: string;
  /** Copies it reported ingesting. */
  readonly copies: number;
  readonly ratePerSec?: number;
  /** Sum and largest of its copies' lags (records). */
  readonly lag?: number;
  readonly maxLag?: number;
}

export interface IngestionSamplerOptions {
  /** How long a node asked over HTTP may take (default 1000 ms). */
  readonly timeoutMs?: number;
  /** Read the nodes of this process directly (default true; tests of the HTTP path turn it off). */
  readonly inProcess?: boolean;
}

interface Reading {
  readonly incarnation: string | undefined;
  readonly at: number;
  readonly positions: ReadonlyMap<string, number>;
}

const copyKey = (dataset: string, shard: number) => `${dataset}/${shard}`;

export class IngestionSampler {
  private readings = new Map<string, Reading>();
  private copiesByShard = new Map<string, CopySample[]>();
  private readonly timeoutMs: number;
  private readonly inProcess: boolean;

  constructor(
    /** The node serving the page (a function: the embedded demo's answering node changes). */
    private readonly self: () => ShardherdNode,
    options: IngestionSamplerOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? 1_000;
    this.inProcess = options.inProcess ?? true;
  }

  /** Reads every member once; returns a row per member, in the members' order. */
  async sample(members: readonly SampledMember[]): Promise<NodeSample[]> {
    const answers = await Promise.all(members.map((m) => this.read(m)));
    const readings = new Map<string, Reading>();
    const copiesByShard = new Map<string, CopySample[]>();
    const rows = answers.map((answer, i): NodeSample => {
      const node = members[i]!.node;
      if (!('copies' in answer)) return { node, copies: 0, ...answer };
      if (!answer.tracked) return { node, state: 'untracked', copies: 0 };
      const before = this.readings.get(node);
      const comparable = before !== undefined && before.incarnation === answer.incarnation && answer.at > before.at;
      const positions = new Map<string, number>();
      let rate = 0;
      let lag = 0;
      let maxLag = 0;
      let lagKnown = false;
      for (const c of answer.copies) {
        const key = copyKey(c.dataset, c.shard);
        positions.set(key, c.position);
        const was = comparable ? before.positions.get(key) : undefined;
        // A copy that started over (a new reader from a checkpoint) reads from further back: no rate this once.
        const ratePerSec = was !== undefined && c.position >= was ? ((c.position - was) * 1000) / (answer.at - before!.at) : undefined;
        if (ratePerSec !== undefined) rate += ratePerSec;
        if (c.lag !== undefined) {
          lagKnown = true;
          lag += c.lag;
          maxLag = Math.max(maxLag, c.lag);
        }
        const sample: CopySample = {
          node,
          position: c.position,
          at: answer.at,
          ...(ratePerSec === undefined ? {} : { ratePerSec }),
          ...(c.lag === undefined ? {} : { lag: c.lag }),
        };
        const list = copiesByShard.get(key);
        if (list) list.push(sample);
        else copiesByShard.set(key, [sample]);
      }
      readings.set(node, { incarnation: answer.incarnation, at: answer.at, positions });
      return { node, state: 'ok', copies: answer.copies.length, ...(comparable ? { ratePerSec: rate } : {}), ...(lagKnown ? { lag, maxLag } : {}) };
    });
    this.readings = readings;
    this.copiesByShard = copiesByShard;
    return rows;
  }

  /** The copies of one shard as last sampled, on whichever nodes reported them. */
  copies(dataset: string, shard: number): readonly CopySample[] {
    return this.copiesByShard.get(copyKey(dataset, shard)) ?? [];
  }

  /** Forgets every reading (the page feed stopped). */
  reset(): void {
    this.readings = new Map();
    this.copiesByShard = new Map();
  }

  private async read(member: SampledMember): Promise<NodeIngestion | { state: NodeSampleState; reason?: string }> {
    const here = this.self();
    const local = (this.inProcess ? localNodes(here) : [here]).find(
      (n) => n.node === member.node && n.incarnation === member.incarnation && n.state === 'running',
    );
    if (local) return nodeIngestion(local);
    if (member.address === undefined || !/^https?:\/\//i.test(member.address)) return { state: 'no-address' };
    const url = new URL('api/v1/node/ingestion', member.address.endsWith('/') ? member.address : `${member.address}/`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(this.timeoutMs) });
      if (!res.ok) return { state: 'unreachable', reason: `${url.href} answered ${res.status}` };
      const body = (await res.json()) as NodeIngestion;
      // Another incarnation answers at that address: its copies are not the member's.
      if (body.node !== member.node || body.incarnation !== member.incarnation)
        return { state: 'unreachable', reason: `${url.href} is ${body.node} (incarnation ${body.incarnation})` };
      return body;
    } catch (e) {
      return { state: 'unreachable', reason: `${url.href}: ${e instanceof Error ? e.message : String(e)}` };
    }
  }
}
