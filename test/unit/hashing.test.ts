// Record hashing: murmur3 x86_32 against the reference vectors (services.md §7), the 31*a+b
// combiner, and frozen values of shardKeyHash and partitionKeyHash.
import { describe, expect, it } from 'vitest';
import { combineHashes, DEFAULT_HASH_SEED, murmur3, partitionKeyHash, shardKeyHash } from '../../src/core/hashing.js';

describe('murmur3 x86_32 (services.md §7 reference vectors)', () => {
  it.each([
    ['', 0, 0x00000000],
    ['', 1, 0x514e28b7],
    ['', 0xffffffff, 0x81f16f39],
    ['\0\0\0\0', 0, 0x2362f9de],
    ['aaaa', 0x9747b28c, 0x5a97808a],
    ['Hello, world!', 0x9747b28c, 0x24884cba],
    ['The quick brown fox jumps over the lazy dog', 0, 0x2e4ff723],
    ['hello', 0, 0x248bfa47],
    ['ππππππππ', 0x9747b28c, 0xd58063c1], // UTF-8 bytes, not UTF-16 code units
  ])('murmur3(%j, %i) = %i', (input, seed, expected) => {
    expect(murmur3(input, seed)).toBe(expected);
  });

  it('hashes raw bytes the same as the string of those bytes', () => {
    expect(murmur3(Uint8Array.of(0, 0, 0, 0), 0)).toBe(0x2362f9de);
    expect(murmur3(new TextEncoder().encode('ππππππππ'), 0x9747b28c)).toBe(0xd58063c1);
  });

  it('takes seed 0 by default and returns an unsigned 32-bit integer', () => {
    expect(murmur3('hello')).toBe(0x248bfa47);
    expect(murmur3('ππππππππ', 0x9747b28c)).toBeGreaterThan(0x7fffffff); // not a negative int
  });

  it('a negative seed is read as its unsigned 32-bit value', () => {
    expect(murmur3('', -1)).toBe(0x81f16f39);
  });

  it("the default seed is FiloDB's 0x9747b28c", () => {
    expect(DEFAULT_HASH_SEED).toBe(0x9747b28c);
  });
});

describe('combineHashes', () => {
  it('is 31 * a + b', () => {
    expect(combineHashes(7, 0)).toBe(217);
    expect(combineHashes(7, 5)).toBe(222);
    expect(combineHashes(-1, 0)).toBe(-31);
  });

  it('wraps at 32 bits and returns a signed 32-bit int', () => {
    expect(combineHashes(0x7fffffff, 1)).toBe(2147483618);
    expect(combineHashes(0xffffffff, 0xffffffff)).toBe(-32);
    expect(combineHashes(0x10000000, 5)).toBe(-268435451);
    // The same as exact arithmetic reduced to a signed 32-bit int.
    for (const [a, b] of [
      [0x12345678, 0x9abcdef0],
      [0x7fffffff, 0x7fffffff],
      [-0x80000000, -1],
    ] as const) {
      expect(combineHashes(a, b)).toBe(Number(BigInt.asIntN(32, 31n * BigInt(a) + BigInt(b))));
    }
  });
});

describe('shardKeyHash', () => {
  it('folds murmur3 of the values, in the order of the sorted column names, from 7', () => {
    const m = (v: string) => murmur3(v, DEFAULT_HASH_SEED);
    // Sorted column names: _metric_, _ns_, _ws_.
    const expected = combineHashes(combineHashes(combineHashes(7, m('cpu')), m('app')), m('demo'));
    expect(shardKeyHash({ _ws_: 'demo', _ns_: 'app', _metric_: 'cpu' })).toBe(expected);
    expect(shardKeyHash({})).toBe(7);
  });

  it('does not depend on the insertion order of the keys', () => {
    const a = shardKeyHash({ _ws_: 'demo', _ns_: 'app', _metric_: 'cpu' });
    expect(shardKeyHash({ _metric_: 'cpu', _ws_: 'demo', _ns_: 'app' })).toBe(a);
    expect(shardKeyHash({ _ns_: 'app', _metric_: 'cpu', _ws_: 'demo' })).toBe(a);
  });

  it('depends on which column holds which value', () => {
    expect(shardKeyHash({ _ws_: 'app', _ns_: 'demo', _metric_: 'cpu' })).not.toBe(shardKeyHash({ _ws_: 'demo', _ns_: 'app', _metric_: 'cpu' }));
  });

  // FROZEN golden values, computed once from this implementation. Gateways and query routers
  // already deployed compute these hashes to pick shards: changing any of these numbers breaks
  // wire compatibility with them (records and queries would go to different shards).
  it('golden values (frozen)', () => {
    expect(shardKeyHash({ _ws_: 'demo', _ns_: 'app', _metric_: 'cpu' })).toBe(1056932556); // 0x3eff82cc
    expect(shardKeyHash({ _ws_: 'ππππ', _ns_: 'app', _metric_: 'http_requests_total' })).toBe(830546011); // 0x3181205b
  });
});

describe('partitionKeyHash', () => {
  it('folds combine(murmur3(key), murmur3(value)) over the tags sorted by key, from 7', () => {
    const m = (v: string) => murmur3(v, DEFAULT_HASH_SEED);
    const expected = combineHashes(combineHashes(7, combineHashes(m('host'), m('h1'))), combineHashes(m('region'), m('eu')));
    expect(partitionKeyHash({ region: 'eu', host: 'h1' })).toBe(expected);
    expect(partitionKeyHash({})).toBe(7);
  });

  it('does not depend on the insertion order of the tags', () => {
    const a = partitionKeyHash({ host: 'h1', region: 'eu', job: 'api' });
    expect(partitionKeyHash({ job: 'api', region: 'eu', host: 'h1' })).toBe(a);
    expect(partitionKeyHash({ region: 'eu', host: 'h1', job: 'api' })).toBe(a);
  });

  it('ignores `le` by default, so all buckets of a histogram land on one shard', () => {
    const series = partitionKeyHash({ host: 'h1', region: 'eu' });
    expect(partitionKeyHash({ host: 'h1', region: 'eu', le: '0.5' })).toBe(series);
    expect(partitionKeyHash({ le: '+Inf', host: 'h1', region: 'eu' })).toBe(series);
  });

  it('counts `le` when the ignore set does not name it, and ignores whatever it names', () => {
    const series = partitionKeyHash({ host: 'h1', region: 'eu' });
    expect(partitionKeyHash({ host: 'h1', region: 'eu', le: '0.5' }, new Set())).not.toBe(series);
    expect(partitionKeyHash({ host: 'h1', region: 'eu', pod: 'p-1' }, new Set(['pod']))).toBe(series);
  });

  it('depends on the values', () => {
    expect(partitionKeyHash({ host: 'h2', region: 'eu' })).not.toBe(partitionKeyHash({ host: 'h1', region: 'eu' }));
  });

  // FROZEN golden values, computed once from this implementation. Gateways and query routers
  // already deployed compute these hashes to pick shards: changing any of these numbers breaks
  // wire compatibility with them (records and queries would go to different shards).
  it('golden values (frozen)', () => {
    expect(partitionKeyHash({ host: 'h1', region: 'eu' })).toBe(870162016); // 0x33dd9e60
    expect(partitionKeyHash({ city: 'ππππ', host: 'h1', le: '0.5' })).toBe(-69748528); // 0xfbd7b8d0
    expect(partitionKeyHash({ host: 'h1', le: '0.5' }, new Set())).toBe(1244898799); // 0x4a33a5ef
  });
});
