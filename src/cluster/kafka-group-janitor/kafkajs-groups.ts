// The janitor's group requests on kafkajs's admin client.
import type { Admin } from 'kafkajs';
import { createKafka, type KafkaConnection } from '../kafka-client.js';
import type { GroupAdmin } from '../kafka-group-janitor.js';

export class KafkajsGroupAdmin implements GroupAdmin {
  private readonly admin: Admin;
  private connected: Promise<void> | undefined;

  constructor(connection: KafkaConnection) {
    this.admin = createKafka(connection).admin();
  }

  async groupIds(): Promise<string[]> {
    await this.connect();
    return (await this.admin.listGroups()).groups.map((g) => g.groupId);
  }

  async memberless(groupIds: readonly string[]): Promise<string[]> {
    await this.connect();
    const described = await this.admin.describeGroups([...groupIds]);
    return described.groups.filter((g) => g.state === 'Empty' || g.state === 'Dead').map((g) => g.groupId);
  }

  async deleteGroups(groupIds: readonly string[]): Promise<string[]> {
    await this.connect();
    const results = await this.admin.deleteGroups([...groupIds]).catch((e: unknown) => {
      // kafkajs rejects the whole call when one group fails; the error carries each group's result.
      const groups = (e as { groups?: { groupId: string; errorCode: number }[] }).groups;
      if (!groups) throw e;
      return groups;
    });
    return results.filter((r) => r.errorCode === 0).map((r) => r.groupId);
  }

  async close(): Promise<void> {
    if (this.connected !== undefined) await this.admin.disconnect();
  }

  private connect(): Promise<void> {
    this.connected ??= this.admin.connect();
    return this.connected;
  }
}
