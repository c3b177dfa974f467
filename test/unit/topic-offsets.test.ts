// kafkajs fails `fetchTopicOffsets` with a TypeError when its metadata lacks the topic's partitions
// for a moment, and with a retriable error its admin does not retry when a leader moved; a shard
// whose start failed that way moved away for nothing.
import type { Admin } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { fetchTopicOffsets } from '../../src/cluster/topic-offsets.js';

/** The default's attempts, without the waits between them. */
const NO_WAIT = { attempts: 6, backoffMs: 0 };

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
    await expect(fetchTopicOffsets(admin, 't', NO_WAIT)).resolves.toEqual(offsets);
    expect(admin.calls).toBe(3);
  });

  it('answers after a leader that moved stopped saying it is not the leader (a retriable error kafkajs passes on)', async () => {
    const notLeader = Object.assign(new Error('This server is not the leader for that topic-partition'), {
      name: 'KafkaJSProtocolError',
      type: 'NOT_LEADER_OR_FOLLOWER',
      retriable: true,
    });
    const admin = adminFailing([notLeader, notLeader]);
    await expect(fetchTopicOffsets(admin, 't', NO_WAIT)).resolves.toEqual(offsets);
    expect(admin.calls).toBe(3);
  });

  it("gives up after the policy's attempts, with the error", async () => {
    const admin = adminFailing(Array.from({ length: 7 }, emptyMetadata));
    await expect(fetchTopicOffsets(admin, 't', NO_WAIT)).rejects.toThrow(TypeError);
    expect(admin.calls).toBe(6);
  });

  it('throws an error Kafka does not call retriable at once', async () => {
    const admin = adminFailing([new Error('This server does not host this topic-partition')]);
    await expect(fetchTopicOffsets(admin, 't', NO_WAIT)).rejects.toThrow('does not host');
    expect(admin.calls).toBe(1);
  });
});
