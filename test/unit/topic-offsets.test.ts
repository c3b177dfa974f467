// kafkajs fails `fetchTopicOffsets` with a TypeError when its metadata lacks the topic's partitions
// for a moment; a shard whose start failed that way moved away for nothing.
import type { Admin } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { fetchTopicOffsets } from '../../src/cluster/topic-offsets.js';

const offsets = [{ partition: 0, offset: '7', high: '7', low: '0' }];

function adminFailing(failures: readonly Error[]): Admin & { calls: number } {
  const admin = {
    calls: 0,
    fetchTopicOffsets: async () => {
      const failure = failures[admin.calls++];
      if (failure) throw failure;
      return offsets;
    },
  };
  return admin as unknown as Admin & { calls: number };
}

const emptyMetadata = () => new TypeError("Cannot destructure property 'partitions' of 'high.pop(...)' as it is undefined.");

describe('fetchTopicOffsets', () => {
  it("answers after kafkajs's empty-metadata TypeError passed", async () => {
    const admin = adminFailing([emptyMetadata(), emptyMetadata()]);
    await expect(fetchTopicOffsets(admin, 't')).resolves.toEqual(offsets);
    expect(admin.calls).toBe(3);
  });

  it('gives up after 5 attempts, with the error', async () => {
    const admin = adminFailing(Array.from({ length: 6 }, emptyMetadata));
    await expect(fetchTopicOffsets(admin, 't')).rejects.toThrow(TypeError);
    expect(admin.calls).toBe(5);
  });

  it('throws any other error at once (kafkajs has retried those itself)', async () => {
    const admin = adminFailing([new Error('This server does not host this topic-partition')]);
    await expect(fetchTopicOffsets(admin, 't')).rejects.toThrow('does not host');
    expect(admin.calls).toBe(1);
  });
});
