// Shard arithmetic golden vectors (FiloDB reference §2.3), through the functions of spread.ts and
// the ShardMapper methods. Gateways and query routers compute the same shards, so these must not move.
import { describe, expect, it } from 'vitest';
import { InvalidShardCountError, InvalidSpreadError } from '../../src/core/errors.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { ingestionShard, isValidShardCount, log2Shards, MAX_SHARDS, partitionHashMask, queryShards, shardHashMask } from '../../src/core/spread.js';

/** Java's String.hashCode: h = 31*h + charCode in 32-bit wrapping arithmetic (a signed int). */
function javaStringHashCode(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (Math.imul(31, h) + s.charCodeAt(i)) | 0;
  return h;
}

const range = (from: number, toExclusive: number): number[] => Array.from({ length: toExclusive - from }, (_, i) => from + i);

const SHARD_KEY_HASH = javaStringHashCode('someAppName$someMetricName'); // 0x111fcddb
const PARTITION_HASH = javaStringHashCode('a=1;b=2;c=3'); // 0x9d3d772f, negative as a Java int

/** §2.3, numShards = 64. */
const INGESTION_TABLE: [spread: number, shard: number][] = [
  [0, 0x1b],
  [1, 0x3b],
  [2, 0x2b],
  [3, 0x2b],
  [4, 0x2f],
  [5, 0x2f],
  [6, 0x2f],
];

/** §2.3, numShards = 64. */
const QUERY_TABLE: [spread: number, shards: number[]][] = [
  [0, [0x1b]],
  [1, [0x1b, 0x3b]],
  [2, [0x0b, 0x1b, 0x2b, 0x3b]],
  [3, range(0, 8).map((k) => 0x03 + 8 * k)],
  [4, range(0, 16).map((k) => 3 + 4 * k)],
  [5, range(0, 32).map((k) => 1 + 2 * k)],
  [6, range(0, 64)],
];

describe('the FiloDB test vectors', () => {
  it('come from Java String.hashCode', () => {
    expect(SHARD_KEY_HASH >>> 0).toBe(0x111fcddb);
    expect(PARTITION_HASH >>> 0).toBe(0x9d3d772f);
    expect(javaStringHashCode('123456') >>> 0).toBe(0x56760663);
  });
});

describe('ingestionShard (§2.3, 64 shards)', () => {
  it.each(INGESTION_TABLE)('spread %i -> shard %i (spread.ts)', (spread, shard) => {
    expect(ingestionShard(64, SHARD_KEY_HASH, PARTITION_HASH, spread)).toBe(shard);
  });

  it.each(INGESTION_TABLE)('spread %i -> shard %i (ShardMapper)', (spread, shard) => {
    expect(new ShardMapper(64).ingestionShard(SHARD_KEY_HASH, PARTITION_HASH, spread)).toBe(shard);
  });

  it('gives the same shard for the unsigned form of the hashes', () => {
    for (const [spread, shard] of INGESTION_TABLE) {
      expect(ingestionShard(64, 0x111fcddb, 0x9d3d772f, spread)).toBe(shard);
    }
  });

  it('spread 7 is refused with InvalidSpreadError', () => {
    expect(() => ingestionShard(64, SHARD_KEY_HASH, PARTITION_HASH, 7)).toThrow(InvalidSpreadError);
    expect(() => new ShardMapper(64).ingestionShard(SHARD_KEY_HASH, PARTITION_HASH, 7)).toThrow(InvalidSpreadError);
  });

  it('negative and fractional spreads are refused', () => {
    expect(() => ingestionShard(64, SHARD_KEY_HASH, PARTITION_HASH, -1)).toThrow(InvalidSpreadError);
    expect(() => ingestionShard(64, SHARD_KEY_HASH, PARTITION_HASH, 0.5)).toThrow(InvalidSpreadError);
  });
});

describe('queryShards (§2.3, 64 shards)', () => {
  it.each(QUERY_TABLE)('spread %i (spread.ts)', (spread, shards) => {
    expect(queryShards(64, SHARD_KEY_HASH, spread)).toEqual(shards);
  });

  it.each(QUERY_TABLE)('spread %i (ShardMapper)', (spread, shards) => {
    expect(new ShardMapper(64).queryShards(SHARD_KEY_HASH, spread)).toEqual(shards);
  });

  it('spread 7 is refused with InvalidSpreadError', () => {
    expect(() => queryShards(64, SHARD_KEY_HASH, 7)).toThrow(InvalidSpreadError);
    expect(() => new ShardMapper(64).queryShards(SHARD_KEY_HASH, 7)).toThrow(InvalidSpreadError);
  });
});

describe('ingestion and query agree', () => {
  const HASHES = [0, 1, -1, 7, 12345, 0x7fffffff, -0x80000000, SHARD_KEY_HASH, PARTITION_HASH, 0x56760663, 0xdeadbeef | 0, 0x0badf00d];
  const SHARD_COUNTS = [1, 2, 8, 64, 256, 65536];

  it('every ingestion shard of a shard key is in its query set, which has 2^spread ascending shards in range', () => {
    let checked = 0;
    for (const numShards of SHARD_COUNTS) {
      for (let spread = 0; spread <= log2Shards(numShards); spread++) {
        for (const key of HASHES) {
          const query = queryShards(numShards, key, spread);
          expect(query).toHaveLength(2 ** spread);
          expect(query.every((s, i) => s >= 0 && s < numShards && (i === 0 || s > query[i - 1]!))).toBe(true);
          for (const part of HASHES) {
            const shard = ingestionShard(numShards, key, part, spread);
            expect(query).toContain(shard);
            checked += 1;
          }
        }
      }
    }
    expect(checked).toBeGreaterThan(3000);
  });

  it('the query set is exactly the set of shards the key can be ingested to', () => {
    for (let spread = 0; spread <= 6; spread++) {
      const reachable = new Set(range(0, 64).map((part) => ingestionShard(64, SHARD_KEY_HASH, part, spread)));
      expect([...reachable].sort((a, b) => a - b)).toEqual(queryShards(64, SHARD_KEY_HASH, spread));
    }
  });

  it('one shard with spread 0: everything goes to shard 0; spread 1 is refused', () => {
    for (const h of [0, -1, SHARD_KEY_HASH, PARTITION_HASH]) {
      expect(ingestionShard(1, h, PARTITION_HASH, 0)).toBe(0);
      expect(queryShards(1, h, 0)).toEqual([0]);
    }
    expect(new ShardMapper(1).queryShards(SHARD_KEY_HASH, 0)).toEqual([0]);
    expect(() => queryShards(1, SHARD_KEY_HASH, 1)).toThrow(InvalidSpreadError);
  });
});

describe('masks', () => {
  it('shard-key bits are the low log2(n) - spread bits, partition bits the high spread bits', () => {
    expect(shardHashMask(64, 0)).toBe(0b111111);
    expect(partitionHashMask(64, 0)).toBe(0);
    expect(shardHashMask(64, 2)).toBe(0b001111);
    expect(partitionHashMask(64, 2)).toBe(0b110000);
    expect(shardHashMask(64, 6)).toBe(0);
    expect(partitionHashMask(64, 6)).toBe(0b111111);
  });
});

describe('shard counts', () => {
  it.each([
    [1, true],
    [2, true],
    [64, true],
    [65536, true],
    [0, false],
    [3, false],
    [34, false],
    [-2, false],
    [1.5, false],
    [131072, false],
    [Number.NaN, false],
  ])('isValidShardCount(%s) is %s', (n, valid) => {
    expect(isValidShardCount(n)).toBe(valid);
  });

  it('MAX_SHARDS is 65536', () => {
    expect(MAX_SHARDS).toBe(65536);
  });

  it('log2Shards gives the bit count and refuses 34 with InvalidShardCountError', () => {
    expect(log2Shards(1)).toBe(0);
    expect(log2Shards(64)).toBe(6);
    expect(log2Shards(65536)).toBe(16);
    expect(() => log2Shards(34)).toThrow(InvalidShardCountError);
    expect(() => log2Shards(0)).toThrow(InvalidShardCountError);
  });

  it('arithmetic on an invalid shard count throws InvalidShardCountError', () => {
    expect(() => queryShards(34, SHARD_KEY_HASH, 0)).toThrow(InvalidShardCountError);
    expect(() => ingestionShard(34, SHARD_KEY_HASH, PARTITION_HASH, 0)).toThrow(InvalidShardCountError);
  });
});
