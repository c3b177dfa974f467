// The janitor's group requests on @platformatic/kafka's admin client.
import type { Admin } from '@platformatic/kafka';
import type { KafkaConnection } from '../kafka-client.js';
import type { GroupAdmin } from '../kafka-group-janitor.js';
import { loadPlatformaticKafka, platformaticOptions } from '../platformatic-kafka.js';
import { SharedAttempt } from '../shared-attempt.js';

/** A group's states without a member, as the library spells them (Kafka's names, or their upper-case form). */
const MEMBERLESS = new Set(['EMPTY', 'DEAD']);

export class PlatformaticGroupAdmin implements GroupAdmin {
  private readonly admin: SharedAttempt<Admin>;

  constructor(connection: KafkaConnection) {
    this.admin = new SharedAttempt(async () => new (await loadPlatformaticKafka()).Admin(platformaticOptions(connection)));
  }

  async groupIds(): Promise<string[]> {
    return [...(await (await this.admin.get()).listGroups()).keys()];
  }

  async memberless(groupIds: readonly string[]): Promise<string[]> {
    const described = await (await this.admin.get()).describeGroups({ groups: [...groupIds] });
    return [...described.values()].filter((g) => MEMBERLESS.has(g.state.toUpperCase())).map((g) => g.id);
  }

  async deleteGroups(groupIds: readonly string[]): Promise<string[]> {
    const admin = await this.admin.get();
    // One request per group: the library fails a whole request on one group's error, without saying which.
    const deleted = await Promise.all(
      groupIds.map((id) =>
        admin.deleteGroups({ groups: [id] }).then(
          () => id,
          () => undefined,
        ),
      ),
    );
    return deleted.filter((id) => id !== undefined);
  }

  async close(): Promise<void> {
    await this.admin.take()?.then(
      (admin) => admin.close(),
      () => undefined,
    );
  }
}
