// Deletes the consumer groups a node's earlier incarnations left behind. Each incarnation has
// groups of its own (bus subscriptions, ingestion consumers); a graceful stop leaves them empty, a
// crash leaves them to expire, and a group with committed offsets stays listed for the broker's
// offsets retention (7 days by default). A node deletes its own stale groups when it starts.
import type { Admin } from 'kafkajs';
import type { Logger } from 'pino';

export interface StaleGroups {
  /** Group ids starting with one of these belong to this node. */
  readonly prefixes: readonly string[];
  /** The groups the running incarnation uses: never deleted. */
  readonly current: (groupId: string) => boolean;
}

/** Deletes this node's groups of other incarnations that have no member; returns their ids. */
export async function deleteStaleGroups(admin: Admin, stale: StaleGroups, log: Logger): Promise<string[]> {
  const { groups } = await admin.listGroups();
  const candidates = groups.map((g) => g.groupId).filter((id) => stale.prefixes.some((p) => id.startsWith(p)) && !stale.current(id));
  if (candidates.length === 0) return [];
  const described = await admin.describeGroups(candidates);
  // A group with members is in use (a previous incarnation still shutting down, say): left alone.
  const empty = described.groups.filter((g) => g.state === 'Empty' || g.state === 'Dead').map((g) => g.groupId);
  if (empty.length === 0) return [];
  const results = await admin.deleteGroups(empty).catch((e: unknown) => {
    // kafkajs rejects the whole call when one group fails; the error carries each group's result.
    const groups = (e as { groups?: { groupId: string; errorCode: number }[] }).groups;
    if (!groups) throw e;
    return groups;
  });
  const deleted = results.filter((r) => r.errorCode === 0).map((r) => r.groupId);
  if (deleted.length > 0)
    log.info({ event: 'kafka.groups-deleted', groups: deleted }, `deleted ${deleted.length} consumer groups of earlier incarnations of this node`);
  return deleted;
}
