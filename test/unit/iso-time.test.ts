// isoTime: the core's own calendar (it may not construct a Date) against the platform's.
import { describe, expect, it } from 'vitest';
import { isoTime, noticeTime } from '../../src/core/iso-time.js';

describe('isoTime', () => {
  it('gives what Date.prototype.toISOString gives, across leap days, centuries and before 1970', () => {
    const samples = [
      0, 1, 999, 86_399_999, 86_400_000, -1, -86_400_001, 951_782_400_000, 951_868_799_999, 4_107_542_400_000, 1_700_000_000_123, 253_402_300_799_999,
      -62_167_219_200_000,
    ];
    for (let i = 0, x = 12_345; i < 2_000; i++) {
      x = (x * 1_103_515_245 + 12_345) % 2_147_483_648;
      samples.push((x / 2_147_483_648) * 8_000_000_000_000 - 1_000_000_000_000);
    }
    for (const ms of samples) expect(isoTime(ms), String(ms)).toBe(new Date(Math.floor(ms)).toISOString());
  });

  it('a notice time carries the raw milliseconds beside it', () => {
    expect(noticeTime(1_700_000_060_000)).toBe('2023-11-14T22:14:20.000Z (1700000060000)');
  });
});
