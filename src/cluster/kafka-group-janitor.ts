// Deletes the consumer groups a node's earlier incarnations left behind. Each incarnation has
// groups of its own (bus subscriptions, ingestion consumers); a graceful stop leaves them empty, a
// crash leaves them to expire, and a group with committed offsets stays listed for the broker's
// offsets retention (7 days by default). A node deletes its own stale groups when it starts.
import type { Logger } from 'pino';
import type { KafkaConnection } from './kafka-client.js';
import type { KafkaClientLibrary } from './kafka-options.js';

export interface StaleGroups {
  /** Group ids starting with one of these belong to this node. */
  readonly prefixes: readonly string[];
  /** The groups the running incarnation uses: never deleted. */
  readonly current: (groupId: string) => boolean;
}

/** What the janitor asks of a Kafka admin client, whichever library it is. */
export interface GroupAdmin {
  /** Every consumer group's id. */
  groupIds(): Promise<string[]>;
  /** Of `groupIds`, those without a member (Kafka's states Empty and Dead). */
  memberless(groupIds: readonly string[]): Promise<string[]>;
  /** Deletes the groups; returns those deleted (a group that gained a member meanwhile is not). */
  deleteGroups(groupIds: readonly string[]): Promise<string[]>;
  close(): Promise<void>;
}

/** The janitor's admin client on the node's client library. */
export async function groupAdminOf(client: KafkaClientLibrary, connection: KafkaConnection): Promise<GroupAdmin> {
  if (client === 'kafkajs') return new (await import('./kafka-group-janitor/kafkajs-groups.js')).KafkajsGroupAdmin(connection);
  return new (await import('./kafka-group-janitor/platformatic-groups.js')).PlatformaticGroupAdmin(connection);
}

/** Deletes this node's groups of other incarnations that have no member; returns their ids. */
export async function deleteStaleGroups(admin: GroupAdmin, stale: StaleGroups, log: Logger): Promise<string[]> {
  const candidates = (await admin.groupIds()).filter((id) => stale.prefixes.some((p) => id.startsWith(p)) && !stale.current(id));
  if (candidates.length === 0) return [];
  // A group with members is in use (a previous incarnation still shutting down, say): left alone.
  const empty = await admin.memberless(candidates);
  if (empty.length === 0) return [];
  const deleted = await admin.deleteGroups(empty);
  if (deleted.length > 0)
    log.info({ event: 'kafka.groups-deleted', groups: deleted }, `deleted ${deleted.length} consumer groups of earlier incarnations of this node`);
  return deleted;
}
