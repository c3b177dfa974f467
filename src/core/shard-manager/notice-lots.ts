// A decision about many shards says so once per kind of notice, not once per shard: a join wave's
// round started 98 304 handoffs and a 65 536 × 3 setup added 131 072 copies in one decision each,
// and a notice per copy was a log line per copy on the singleton (issue 34: "no log line per copy
// for a node-wide event"). The counts stay exact (`Notice.lot`), and so do the metrics built on them.
import type { Effect, Notice } from './protocol.js';

/** Notices of one kind about shards of one dataset that a decision keeps apart; past it, one stands for them all. */
export const NOTICES_APART_UP_TO = 10;
/** The messages a lot keeps as its sample. */
const SAMPLE = 3;

/**
 * The notices of one decision, in order, with each kind about shards of one dataset (same name,
 * level and dataset) past `NOTICES_APART_UP_TO` made one notice where its first was.
 */
export function lotOfNotices(notices: readonly Notice[]): Effect[] {
  const kinds = new Map<string, Notice[]>();
  for (const n of notices) {
    if (n.shard === undefined) continue;
    const key = kindOf(n);
    const list = kinds.get(key);
    if (list) list.push(n);
    else kinds.set(key, [n]);
  }
  const out: Effect[] = [];
  for (const n of notices) {
    const same = n.shard === undefined ? undefined : kinds.get(kindOf(n));
    if (same === undefined || same.length <= NOTICES_APART_UP_TO) {
      out.push({ type: 'Notice', notice: n });
      continue;
    }
    if (same[0] !== n) continue; // said by the lot, where its first was
    const dataset = n.dataset === undefined ? '' : `${n.dataset}: `;
    out.push({
      type: 'Notice',
      notice: {
        ...n,
        message: `${dataset}${n.name} × ${same.length} in one decision; the first: ${n.message}`,
        lot: { count: same.length, sample: same.slice(0, SAMPLE).map((x) => x.message) },
      },
    });
  }
  return out;
}

const kindOf = (n: Notice): string => `${n.name}\u0000${n.level}\u0000${n.dataset ?? ''}`;
