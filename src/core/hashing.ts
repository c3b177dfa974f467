import murmur from 'murmurhash3js-revisited';

const utf8 = new TextEncoder();

/** Seed FiloDB uses for its record hashes; we keep it so hash values read the same in logs. */
export const DEFAULT_HASH_SEED = 0x9747b28c;

/**
 * MurmurHash3 x86_32 over the UTF-8 bytes of a string (or over raw bytes): the reference
 * algorithm, the same as Guava's `murmur3_32_fixed` and Go's `spaolacci/murmur3`. Returns an
 * unsigned 32-bit integer.
 *
 * Gotchas: not Scala's `MurmurHash3.stringHash`, which hashes UTF-16 chars.
 */
export function murmur3(input: string | Uint8Array, seed = 0): number {
  const bytes = typeof input === 'string' ? utf8.encode(input) : input;
  return murmur.x86.hash32(bytes, seed >>> 0) >>> 0;
}

/** FiloDB's hash combiner: `31 * a + b` in 32-bit wrapping arithmetic. */
export const combineHashes = (a: number, b: number): number => (Math.imul(31, a) + b) | 0;

function sortedEntries(fields: Readonly<Record<string, string>>): [string, string][] {
  return Object.entries(fields).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * Hash of a record's shard key (e.g. `{ _ws_: 'demo', _ns_: 'app', _metric_: 'cpu' }`): starting at 7,
 * fold `combine(h, murmur3(value))` over the values in the order of their sorted column names.
 * Gateways and query routers must compute it the same way, so it is frozen by golden vectors.
 *
 * Gotchas: not FiloDB's value (FiloDB hashes with XXHash32, puts the metric last and trims the
 * `_bucket`/`_count`/`_sum` suffixes), so shard numbers differ from a FiloDB cluster's for the same keys.
 */
export function shardKeyHash(shardKey: Readonly<Record<string, string>>): number {
  let h = 7;
  for (const [, value] of sortedEntries(shardKey)) h = combineHashes(h, murmur3(value, DEFAULT_HASH_SEED));
  return h;
}

/**
 * Hash of a series' full label set (the partition key): tags sorted by key, each contributing
 * `combine(murmur3(key), murmur3(value))`, folded from 7. Labels in `ignore` (FiloDB ignores `le`,
 * so all buckets of a histogram land on one shard) are left out.
 */
export function partitionKeyHash(tags: Readonly<Record<string, string>>, ignore: ReadonlySet<string> = new Set(['le'])): number {
  let h = 7;
  for (const [key, value] of sortedEntries(tags)) {
    if (ignore.has(key)) continue;
    h = combineHashes(h, combineHashes(murmur3(key, DEFAULT_HASH_SEED), murmur3(value, DEFAULT_HASH_SEED)));
  }
  return h;
}
