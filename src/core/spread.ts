import { InvalidShardCountError, InvalidSpreadError } from './errors.js';
import type { ShardNum } from './ids.js';

/** The largest shard count a dataset may have. */
export const MAX_SHARDS = 65536;

/** True for 1, 2, 4, ... 65536. Zero is not a shard count (FiloDB accepts it; we do not). */
export function isValidShardCount(n: number): boolean {
  return Number.isInteger(n) && n >= 1 && n <= MAX_SHARDS && (n & (n - 1)) === 0;
}

/** log2 of a valid shard count; throws `InvalidShardCountError` otherwise. */
export function log2Shards(numShards: number): number {
  if (!isValidShardCount(numShards)) throw new InvalidShardCountError(numShards);
  return 31 - Math.clz32(numShards);
}

function checkSpread(numShards: number, spread: number): number {
  const bits = log2Shards(numShards);
  if (!Number.isInteger(spread) || spread < 0 || spread > bits) throw new InvalidSpreadError(spread, numShards);
  return bits;
}

/** The low `log2(numShards) - spread` bits: the part of the shard number taken from the shard key. */
export function shardHashMask(numShards: number, spread: number): number {
  const bits = checkSpread(numShards, spread);
  return (1 << (bits - spread)) - 1;
}

/** The high `spread` bits of the shard number: the part taken from the partition (series) hash. */
export function partitionHashMask(numShards: number, spread: number): number {
  const bits = checkSpread(numShards, spread);
  return shardHashMask(numShards, spread) ^ ((1 << bits) - 1);
}

/**
 * The shard a record goes to: low bits from the shard-key hash, high `spread` bits from the
 * partition hash, so one shard key spreads over `2^spread` shards. Hashes are 32-bit ints (signed or
 * unsigned, only the low bits matter). Throws `InvalidSpreadError` for a spread outside 0..log2(numShards).
 */
export function ingestionShard(numShards: number, shardKeyHash: number, partitionHash: number, spread: number): ShardNum {
  const low = shardHashMask(numShards, spread);
  const high = partitionHashMask(numShards, spread);
  return (((shardKeyHash & low) | (partitionHash & high)) >>> 0) as ShardNum;
}

/**
 * Every shard that may hold records of a shard key: `2^spread` shards in ascending order,
 * `base, base + step, ...` with `step = numShards >> spread`. Every `ingestionShard` of the key is among them.
 */
export function queryShards(numShards: number, shardKeyHash: number, spread: number): ShardNum[] {
  const low = shardHashMask(numShards, spread);
  const base = (shardKeyHash & low) >>> 0;
  const step = low + 1;
  const shards: ShardNum[] = [];
  for (let s = base; s < numShards; s += step) shards.push(s as ShardNum);
  return shards;
}
