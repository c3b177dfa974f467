// A node deletes the empty consumer groups of its earlier incarnations, on the real broker, and
// nothing else: not its current groups, not a group still in use, not another node's.
import { Admin } from '@platformatic/kafka';
import { Kafka, logLevel } from 'kafkajs';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { deleteStaleGroups, groupAdminOf } from '../../src/cluster/kafka-group-janitor.js';
import { KAFKA_CLIENT_LIBRARIES } from '../../src/cluster/kafka-options.js';
import { services, uniqueName } from './support.js';
import { createTopicsWithLeaders } from '../../src/cluster/kafka-client.js';

describe.each(KAFKA_CLIENT_LIBRARIES)('deleteStaleGroups on %s', (client) => {
  const kafka = () => new Kafka({ clientId: 'janitor-test', brokers: services().kafkaBrokers, logLevel: logLevel.NOTHING });
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close().catch(() => undefined);
  });

  it("deletes only this node's empty groups of other incarnations", async () => {
    const k = kafka();
    const admin = k.admin();
    await admin.connect();
    closers.push(() => admin.disconnect());
    const prefix = uniqueName('janitor');
    const topic = `${prefix}.events`;
    await createTopicsWithLeaders(admin, [{ topic, numPartitions: 1 }]);
    const group = (name: string) => `${prefix}.node.${name}`;
    // Groups with committed offsets, as the bus subscriptions of dead incarnations leave them.
    // (@platformatic/kafka commits them at once; kafkajs's setOffsets joins each group first, 5 s each.)
    const committer = new Admin({ clientId: 'janitor-test', bootstrapBrokers: [...services().kafkaBrokers] });
    closers.push(() => committer.close());
    for (const g of ['n1@old-1', 'n1@old-2', 'n1@current', 'n2@old'])
      await committer.alterConsumerGroupOffsets({ groupId: group(g), topics: [{ name: topic, partitionOffsets: [{ partition: 0, offset: 0n }] }] });
    // One still has a member (an earlier incarnation that is still stopping).
    const busy = k.consumer({ groupId: group('n1@busy'), sessionTimeout: 10_000 });
    await busy.connect();
    closers.push(() => busy.disconnect());
    await busy.subscribe({ topics: [topic] });
    await busy.run({ eachMessage: async () => {} });
    await expect.poll(async () => (await admin.describeGroups([group('n1@busy')])).groups[0]!.state, { timeout: 20_000 }).toBe('Stable');

    const janitor = await groupAdminOf(client, { brokers: services().kafkaBrokers, clientId: 'janitor-test', log: pino({ level: 'silent' }) });
    closers.push(() => janitor.close());
    const deleted = await deleteStaleGroups(
      janitor,
      { prefixes: [`${prefix}.node.n1@`], current: (id) => id === group('n1@current') },
      pino({ level: 'silent' }),
    );
    expect(deleted.sort()).toEqual([group('n1@old-1'), group('n1@old-2')]);
    const left = (await admin.listGroups()).groups
      .map((g) => g.groupId)
      .filter((id) => id.startsWith(prefix))
      .sort();
    expect(left).toEqual([group('n1@busy'), group('n1@current'), group('n2@old')]);
    expect(
      await deleteStaleGroups(janitor, { prefixes: [`${prefix}.node.n1@`], current: (id) => id === group('n1@current') }, pino({ level: 'silent' })),
    ).toEqual([]);
  });
});
