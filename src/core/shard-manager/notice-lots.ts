// A decision about many shards says so once per kind of notice, not once per shard: a join wave's
// round started 98 304 handoffs and a 65 536 × 3 setup added 131 072 copies in one decision each,
// and a notice per copy was a log line per copy on the singleton (issue 34: "no log line per copy
// for a node-wide event"). The counts stay exact (`Notice.lot`), and so do the metrics built on them.
import type { Effect, Notice } from './protocol.js';

/** Notices of one kind about shards of one dataset that a decision keeps apart; past it, one stands for them all. */
export const NOTICES_APART_UP_TO = 10;
/** The messages a lot keeps as its sample. */
const SAMPLE = 3;

interface Kind {
  readonly first: Notice;
  count: number;
  readonly sample: string[];
}

/**
 * The notices of one decision as they come: kept in order, with each kind about shards of one
 * dataset (same name, level and dataset) past `NOTICES_APART_UP_TO` made one notice where its
 * first was. Holds at most that many of a kind, however many come.
 */
export class NoticeLots {
  /** The notices kept, each with its kind when it is about a shard. */
  private readonly kept: { readonly notice: Notice; readonly kind: Kind | undefined }[] = [];
  /** By name: the kinds of that name (by level and dataset; a decision has few). */
  private readonly kinds = new Map<string, Kind[]>();

  add(notice: Notice): void {
    if (notice.shard === undefined) {
      this.kept.push({ notice, kind: undefined });
      return;
    }
    let named = this.kinds.get(notice.name);
    if (!named) this.kinds.set(notice.name, (named = []));
    let kind = named.find((k) => k.first.level === notice.level && k.first.dataset === notice.dataset);
    if (!kind) named.push((kind = { first: notice, count: 0, sample: [] }));
    kind.count++;
    if (kind.sample.length < SAMPLE) kind.sample.push(notice.message);
    if (kind.count <= NOTICES_APART_UP_TO) this.kept.push({ notice, kind });
  }

  effects(): Effect[] {
    return this.kept.flatMap(({ notice, kind }): Effect[] => {
      if (kind === undefined || kind.count <= NOTICES_APART_UP_TO) return [{ type: 'Notice', notice }];
      return kind.first === notice ? [{ type: 'Notice', notice: lotNotice(kind) }] : [];
    });
  }
}

function lotNotice({ first, count, sample }: Kind): Notice {
  const dataset = first.dataset === undefined ? '' : `${first.dataset}: `;
  return { ...first, message: `${dataset}${first.name} × ${count} in one decision; the first: ${first.message}`, lot: { count, sample } };
}
