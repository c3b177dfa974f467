// What travels on the bus between nodes and the singleton, and how it is checked on arrival.
// Everything carries a format version; a reader refuses what it does not understand, and the
// caller logs and counts it (a malformed record is skipped, never fatal).
import { z } from 'zod';
import type { DatasetConfig } from '../core/dataset-config.js';
import { validateDatasetConfig } from '../core/dataset-config.js';
import type { DatasetRef, Epoch, Incarnation, NodeId, ReplyTo, SubscriberId } from '../core/ids.js';
import { parseDatasetRef, parseIncarnation, parseNodeId, parseSubscriberId } from '../core/ids.js';
import { err, ok, type Result } from '../core/result.js';
import type { ShardMapSnapshot } from '../core/shard-map-snapshot.js';
import { parseShardMapSnapshot, shardStatusSchema } from '../core/shard-map-snapshot.js';
import type { Reply, RunningShard, ShardManagerInput, SubscriberMessage } from '../core/shard-manager/protocol.js';
import type { ShardEvent, ShardStatus } from '../core/status.js';

export const WIRE_FORMAT = 1;

/** Topic names under a prefix (one cluster per prefix). */
export interface Topics {
  /** To the singleton: requests, node reports, recovery answers. */
  readonly inbox: string;
  /** From the singleton: events, snapshots, desired states, fences, recovery questions. */
  readonly events: string;
  /** From the singleton: replies to requests and acknowledgements of reports. */
  readonly replies: string;
}

/** The consumer group of one node incarnation's subscriptions to the events and replies topics. */
export const nodeGroup = (prefix: string, node: NodeId, incarnation: Incarnation): string => `${nodeGroupPrefix(prefix, node)}${incarnation}`;
/** What every incarnation's `nodeGroup` of a node starts with. */
export const nodeGroupPrefix = (prefix: string, node: NodeId): string => `${prefix}.node.${node}@`;

export const topicsFor = (prefix: string): Topics => ({ inbox: `${prefix}.inbox`, events: `${prefix}.events`, replies: `${prefix}.replies` });

/** Requests anyone may send to the singleton (admin commands, subscriptions, queries). */
export type Request = Exclude<ShardManagerInput, { type: 'Recover' | 'MemberUp' | 'MemberDown' | 'MembershipView' | 'NodeReport' | 'PublishSnapshots' | 'CheckCooldowns' }>;

export type InboxMessage =
  | { readonly format: 1; readonly kind: 'request'; readonly request: Request }
  | { readonly format: 1; readonly kind: 'report'; readonly node: NodeId; readonly incarnation: Incarnation; readonly seq: number; readonly events: readonly ShardEvent[] }
  | {
      readonly format: 1;
      readonly kind: 'cluster-state';
      readonly requestId: string;
      readonly epoch: Epoch;
      readonly node: NodeId;
      readonly incarnation: Incarnation;
      readonly maps: readonly ShardMapSnapshot[];
      readonly subscriptions: readonly { readonly dataset: DatasetRef; readonly subscribers: readonly SubscriberId[] }[];
      readonly watchers: readonly SubscriberId[];
      readonly running: readonly RunningShard[];
    };

export type EventsMessage =
  | { readonly format: 1; readonly kind: 'publish'; readonly epoch: Epoch; readonly to: readonly SubscriberId[]; readonly message: SubscriberMessage }
  /**
   * A dataset's map for nodes to act on. `members` are the incarnations it was made for: a node
   * acts only if its own incarnation is among them, so a restarted node never runs the shards its
   * previous incarnation was given.
   */
  | {
      readonly format: 1;
      readonly kind: 'desired-state';
      readonly epoch: Epoch;
      readonly to: readonly NodeId[];
      readonly members: readonly { readonly node: NodeId; readonly incarnation: Incarnation }[];
      readonly snapshot: ShardMapSnapshot;
      readonly config: DatasetConfig;
    }
  | { readonly format: 1; readonly kind: 'fence'; readonly epoch: Epoch; readonly node: NodeId; readonly incarnation: Incarnation; readonly reason: string }
  /** A drained node holds no copy any more: it may stop (its operator or orchestrator decides when). */
  | { readonly format: 1; readonly kind: 'release'; readonly epoch: Epoch; readonly node: NodeId; readonly incarnation: Incarnation }
  /**
   * A new singleton asks every guardian for its cached maps, subscriptions and running shards.
   * `stored` lists the maps it already read from the MetaStore: a guardian leaves out every map
   * that is no newer than the one listed, so in the normal case (maps are persisted before they
   * are published) an answer carries no map at all.
   *
   * Gotchas: `stored` is optional, not a format bump. A singleton that predates it sends no
   * `stored` and gets every map (as before); a guardian that predates it ignores it and answers in
   * full. Both are correct, only slower; a format bump would make an older guardian refuse the
   * question, and the singleton would recover without that node's maps and running shards.
   */
  | { readonly format: 1; readonly kind: 'cluster-state-request'; readonly epoch: Epoch; readonly requestId: string; readonly stored?: readonly MapStamp[] };

/** Which map of a dataset: its shard count and `(epoch, version)` stamp. */
export interface MapStamp {
  readonly dataset: DatasetRef;
  readonly numShards: number;
  readonly epoch: Epoch;
  readonly version: number;
}

export type RepliesMessage =
  | { readonly format: 1; readonly kind: 'reply'; readonly epoch: Epoch; readonly to: ReplyTo; readonly reply: Reply }
  | { readonly format: 1; readonly kind: 'ack'; readonly epoch: Epoch; readonly node: NodeId; readonly incarnation: Incarnation; readonly seq: number };

/** A record that could not be read: what was wrong, for the log. */
export interface MalformedRecord {
  readonly reason: string;
}

// ------------------------------------------------------------------ schemas

const id = <T>(parse: (raw: unknown) => Result<T, Error>) =>
  z.custom<T>((v) => parse(v).ok, { message: 'malformed identifier' });
const datasetRefS = id<DatasetRef>(parseDatasetRef);
const nodeIdS = id<NodeId>(parseNodeId);
const incarnationS = id<Incarnation>(parseIncarnation);
const subscriberS = id<SubscriberId>(parseSubscriberId);
const replyToS = z.string().min(1).max(512).transform((s) => s as ReplyTo);
const shardS = z.number().int().min(0);

const statusS = shardStatusSchema as unknown as z.ZodType<ShardStatus>;

const eventBase = { dataset: datasetRefS, shard: shardS, node: nodeIdS };
const eventS = z.discriminatedUnion('type', [
  z.object({ type: z.literal('ShardAssignmentStarted'), ...eventBase }),
  z.object({ type: z.literal('RecoveryInProgress'), progressPct: z.number(), ...eventBase }),
  z.object({ type: z.literal('IngestionStarted'), ...eventBase }),
  z.object({ type: z.literal('IngestionError'), error: z.string(), ...eventBase }),
  z.object({ type: z.literal('IngestionStopped'), ...eventBase }),
  z.object({ type: z.literal('ShardDown'), ...eventBase }),
  z.object({ type: z.literal('ShardCopyAdded'), ...eventBase }),
  z.object({ type: z.literal('ShardLeaving'), ...eventBase }),
  z.object({ type: z.literal('ShardLeavingCancelled'), ...eventBase }),
  z.object({ type: z.literal('ShardLeft'), ...eventBase }),
]);

const requestS = z.discriminatedUnion('type', [
  z.object({ type: z.literal('SetupDataset'), config: z.unknown(), replyTo: replyToS }),
  z.object({ type: z.literal('RemoveDataset'), dataset: datasetRefS, replyTo: replyToS }),
  z.object({ type: z.literal('Subscribe'), subscriber: subscriberS, dataset: datasetRefS }),
  z.object({ type: z.literal('SubscribeAll'), subscriber: subscriberS }),
  z.object({ type: z.literal('Unsubscribe'), subscriber: subscriberS, dataset: datasetRefS.optional() }),
  z.object({ type: z.literal('SubscriberTerminated'), subscriber: subscriberS }),
  z.object({ type: z.literal('GetShardMap'), dataset: datasetRefS, replyTo: replyToS }),
  z.object({ type: z.literal('ListRegisteredDatasets'), replyTo: replyToS }),
  z.object({ type: z.literal('StartShards'), dataset: datasetRefS, node: z.string(), shards: z.array(z.number()), replyTo: replyToS }),
  z.object({ type: z.literal('StopShards'), dataset: datasetRefS, shards: z.array(z.number()), replyTo: replyToS }),
  z.object({ type: z.literal('RemoveNode'), node: z.string(), replyTo: replyToS }),
  z.object({ type: z.literal('ReplaceNode'), old: z.string(), new: z.string(), replyTo: replyToS }),
  z.object({ type: z.literal('AddNode'), node: z.string(), replyTo: replyToS }),
  z.object({ type: z.literal('GetNodeOperations'), replyTo: replyToS }),
  z.object({ type: z.literal('DescribeCluster'), replyTo: replyToS, dataset: datasetRefS.optional() }),
]);

const stampsS = z.array(z.object({
  dataset: datasetRefS,
  numShards: z.number().int().min(1),
  epoch: z.number().int().min(0),
  version: z.number().int().min(0),
})).refine((stamps) => new Set(stamps.map((x) => x.dataset)).size === stamps.length, 'a dataset is listed twice');

const inboxS = z.discriminatedUnion('kind', [
  z.object({ format: z.literal(WIRE_FORMAT), kind: z.literal('request'), request: requestS }),
  z.object({ format: z.literal(WIRE_FORMAT), kind: z.literal('report'), node: nodeIdS, incarnation: incarnationS, seq: z.number().int().min(0), events: z.array(eventS) }),
  z.object({
    format: z.literal(WIRE_FORMAT),
    kind: z.literal('cluster-state'),
    requestId: z.string(),
    epoch: z.number().int().min(0),
    node: nodeIdS,
    incarnation: incarnationS,
    maps: z.array(z.unknown()),
    subscriptions: z.array(z.object({ dataset: datasetRefS, subscribers: z.array(subscriberS) })),
    watchers: z.array(subscriberS),
    running: z.array(z.object({ dataset: datasetRefS, shard: shardS, status: statusS })),
  }),
]);

function firstIssue(e: z.ZodError): string {
  const i = e.issues[0];
  return `${i?.path.join('.') || '(root)'}: ${i?.message ?? 'invalid'}`;
}

function checkFormat(value: unknown): string | undefined {
  const format = (value as { format?: unknown } | null)?.format;
  if (format !== WIRE_FORMAT) return `unsupported format ${JSON.stringify(format)}: this version reads format ${WIRE_FORMAT}`;
  return undefined;
}

/**
 * Reads a record of the singleton's inbox. A `SetupDataset` config is validated here, so a bad one
 * becomes a `BadSchema` reply naming the field (see `invalidSetup`), not a malformed record.
 */
export function parseInboxMessage(value: unknown): Result<InboxMessage | InvalidSetup, MalformedRecord> {
  const bad = checkFormat(value);
  if (bad) return err({ reason: bad });
  const parsed = inboxS.safeParse(value);
  if (!parsed.success) return err({ reason: firstIssue(parsed.error) });
  const m = parsed.data;
  if (m.kind === 'cluster-state') {
    const maps: ShardMapSnapshot[] = [];
    for (const raw of m.maps) {
      const snap = parseShardMapSnapshot(raw);
      if (!snap.ok) return err({ reason: snap.error.message });
      maps.push(snap.value);
    }
    return ok({ ...m, format: WIRE_FORMAT, epoch: m.epoch as Epoch, maps });
  }
  if (m.kind === 'request' && m.request.type === 'SetupDataset') {
    const config = validateDatasetConfig(m.request.config);
    if (!config.ok) return ok({ kind: 'invalid-setup', replyTo: m.request.replyTo, message: config.error.message });
    return ok({ format: WIRE_FORMAT, kind: 'request', request: { type: 'SetupDataset', config: config.value, replyTo: m.request.replyTo } });
  }
  return ok(m as InboxMessage);
}

/** A `SetupDataset` whose config failed validation: answered with `BadSchema`. */
export interface InvalidSetup {
  readonly kind: 'invalid-setup';
  readonly replyTo: ReplyTo;
  readonly message: string;
}

/**
 * Reads a record of the events topic. Only the singleton writes there, so the envelope is checked
 * and snapshots are validated; the subscriber message bodies are trusted.
 *
 * Every node reads every record of this topic, and desired states carry a whole map and config.
 * The embedded bus hands all its subscribers one frozen copy of a record, so a frozen value is
 * checked once and its (frozen) result shared: the nodes of an embedded cluster, or of a simulated
 * one, no longer each check the same desired state, which was the simulator's costliest work.
 * Values from Kafka are decoded per reader, never frozen, and checked each time.
 */
export function parseEventsMessage(value: unknown): Result<EventsMessage, MalformedRecord> {
  if (typeof value !== 'object' || value === null || !Object.isFrozen(value)) return checkEventsMessage(value);
  let parsed = parsedFrozenEvents.get(value);
  if (!parsed) {
    parsed = freezeAll(checkEventsMessage(value));
    parsedFrozenEvents.set(value, parsed);
  }
  return parsed;
}

const parsedFrozenEvents = new WeakMap<object, Result<EventsMessage, MalformedRecord>>();

/** Freezes a parse result all through, so that a reader that shares it cannot change it for the others. */
function freezeAll<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) freezeAll(v);
    Object.freeze(value);
  }
  return value;
}

function checkEventsMessage(value: unknown): Result<EventsMessage, MalformedRecord> {
  const bad = checkFormat(value);
  if (bad) return err({ reason: bad });
  const m = value as EventsMessage;
  if (typeof m.epoch !== 'number') return err({ reason: 'no epoch' });
  switch (m.kind) {
    case 'publish':
      return Array.isArray(m.to) && typeof m.message?.type === 'string' ? ok(m) : err({ reason: 'malformed publish' });
    case 'desired-state': {
      const snap = parseShardMapSnapshot(m.snapshot);
      if (!snap.ok) return err({ reason: snap.error.message });
      const config = validateDatasetConfig(m.config);
      if (!config.ok) return err({ reason: config.error.message });
      return Array.isArray(m.to) && Array.isArray(m.members) ? ok({ ...m, snapshot: snap.value, config: config.value }) : err({ reason: 'malformed desired-state' });
    }
    case 'fence':
      return typeof m.node === 'string' && typeof m.incarnation === 'string' ? ok(m) : err({ reason: 'malformed fence' });
    case 'release':
      return typeof m.node === 'string' && typeof m.incarnation === 'string' ? ok(m) : err({ reason: 'malformed release' });
    case 'cluster-state-request': {
      if (typeof m.requestId !== 'string') return err({ reason: 'malformed cluster-state-request' });
      if (m.stored === undefined) return ok(m);
      // A wrong stamp would make guardians leave out a map recovery needs: refuse it whole.
      const stored = stampsS.safeParse(m.stored);
      if (!stored.success) return err({ reason: `malformed cluster-state-request: stored.${firstIssue(stored.error)}` });
      return ok({ ...m, stored: stored.data as MapStamp[] });
    }
    default:
      return err({ reason: `unknown kind ${JSON.stringify((m as { kind?: unknown }).kind)}` });
  }
}

export function parseRepliesMessage(value: unknown): Result<RepliesMessage, MalformedRecord> {
  const bad = checkFormat(value);
  if (bad) return err({ reason: bad });
  const m = value as RepliesMessage;
  if (typeof m.epoch !== 'number') return err({ reason: 'no epoch' });
  if (m.kind === 'reply') return typeof m.to === 'string' && typeof m.reply?.type === 'string' ? ok(m) : err({ reason: 'malformed reply' });
  if (m.kind === 'ack') return typeof m.node === 'string' && Number.isInteger(m.seq) ? ok(m) : err({ reason: 'malformed ack' });
  return err({ reason: `unknown kind ${JSON.stringify((m as { kind?: unknown }).kind)}` });
}

/** The subscriber-id prefix of everything a node incarnation hosts: `<node>@<incarnation>/`. */
export const hostPrefix = (node: NodeId, incarnation: Incarnation): string => `${node}@${incarnation}/`;

/** The member a subscriber id or reply address belongs to, if it follows the `<node>@<incarnation>/` convention. */
export function hostOf(address: string): { node: string; incarnation: string } | undefined {
  const m = /^([^@/]+)@([^/]+)\//.exec(address);
  return m ? { node: m[1]!, incarnation: m[2]! } : undefined;
}

