import { uniformInt } from 'pure-rand/distribution/uniformInt';
import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';

/** A seeded random source: the same seed gives the same sequence, so a failing run can be replayed. */
export class SeededRandom {
  private readonly rng;

  constructor(readonly seed: number) {
    this.rng = xoroshiro128plus(seed);
  }

  /** An integer in `from..to`, both included. */
  int(from: number, to: number): number {
    return uniformInt(this.rng, from, to);
  }

  /** True with probability `p` (resolution 1e-6). */
  chance(p: number): boolean {
    return this.int(0, 999_999) < p * 1_000_000;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[this.int(0, items.length - 1)]!;
  }
}
