// What travels on the bus between nodes and the singleton, and how the inbox and replies are
// checked on arrival (the events topic's records are in wire-events.ts). Everything carries a
// format version; a reader refuses what it does not understand, and the caller logs and counts it
// (a malformed record is skipped, never fatal).
import { z } from 'zod';
import type { DatasetConfig } from '../core/dataset-config.js';
import { validateDatasetConfig } from '../core/dataset-config.js';
import type { DatasetRef, Epoch, Incarnation, NodeId, ReplyTo, SubscriberId } from '../core/ids.js';
import { parseDatasetRef, parseIncarnation, parseNodeId, parseSubscriberId } from '../core/ids.js';
import { decodeSnapshot, encodeSnapshot, type CompactSnapshot, type EncodedEvents, type PackedSnapshot } from '../core/map-codec.js';
import type { PackedEvents } from '../core/packed-events.js';
import { err, ok, type Result } from '../core/result.js';
import type { ShardMapSnapshot } from '../core/shard-map-snapshot.js';
import { shardStatusSchema } from '../core/shard-map-snapshot.js';
import type { LoadReport, MapStamp, MemberIncarnation, Reply, RunningShard, ShardManagerInput, SubscriberMessage } from '../core/shard-manager/protocol.js';
import type { ShardEvent, ShardStatus } from '../core/status.js';

/**
 * The format of every record. Format 2 carries maps as changes and compact snapshots (format 1
 * sent whole maps as desired states); a cluster moves from 1 to 2 by a full restart, and its
 * MetaStore needs nothing.
 */
export const WIRE_FORMAT = 2;

/** Topic names under a prefix (one cluster per prefix). */
export interface Topics {
  /** To the singleton: requests, node reports, recovery answers. */
  readonly inbox: string;
  /** From the singleton: map changes and snapshots, members, digests, fences, recovery questions. */
  readonly events: string;
  /** From the singleton: replies to requests and acknowledgements of reports. */
  readonly replies: string;
  /** Where nodes say at which address they serve a dataset's routed requests (src/protocol/routed-wire.ts). */
  readonly endpoints: string;
}

/** The consumer group of one node incarnation's subscriptions to the events and replies topics. */
export const nodeGroup = (prefix: string, node: NodeId, incarnation: Incarnation): string => `${nodeGroupPrefix(prefix, node)}${incarnation}`;
/** What every incarnation's `nodeGroup` of a node starts with. */
export const nodeGroupPrefix = (prefix: string, node: NodeId): string => `${prefix}.node.${node}@`;

export const topicsFor = (prefix: string): Topics => ({
  inbox: `${prefix}.inbox`,
  events: `${prefix}.events`,
  replies: `${prefix}.replies`,
  endpoints: `${prefix}.endpoints`,
});

/** Requests anyone may send to the singleton (admin commands, subscriptions, queries). */
export type Request = Exclude<
  ShardManagerInput,
  { type: 'Recover' | 'MemberUp' | 'MemberDown' | 'MembershipView' | 'NodeReport' | 'NodeReports' | 'PublishDigest' | 'CheckCooldowns' | 'LoadReports' }
>;

/** The most events one report carries: a node starting thousands of shards sends several reports. */
export const MAX_EVENTS_PER_REPORT = 500;

export type InboxMessage =
  | { readonly format: 2; readonly kind: 'request'; readonly request: Request }
  /**
   * Written by a singleton into its own inbox when it takes over (raft's entry at the start of a
   * term): every record before it was written before the takeover.
   */
  | { readonly format: 2; readonly kind: 'takeover'; readonly epoch: Epoch }
  | {
      readonly format: 2;
      readonly kind: 'report';
      readonly node: NodeId;
      readonly incarnation: Incarnation;
      readonly seq: number;
      readonly events: readonly ShardEvent[];
    }
  /** A node's load figures for its copies of one load-aware dataset (one window; never acknowledged). */
  | { readonly format: 2; readonly kind: 'loads'; readonly report: LoadReport }
  | {
      readonly format: 2;
      readonly kind: 'cluster-state';
      readonly requestId: string;
      readonly epoch: Epoch;
      readonly node: NodeId;
      readonly incarnation: Incarnation;
      readonly maps: readonly ShardMapSnapshot[];
      readonly subscriptions: readonly { readonly dataset: DatasetRef; readonly subscribers: readonly SubscriberId[] }[];
      readonly watchers: readonly SubscriberId[];
      readonly running: readonly RunningShard[];
      /** The newest whole-map format this node reads (absent from older versions): a new singleton knows it from the start. */
      readonly mapFormat?: number | undefined;
    };

/** `cluster-state` as it travels: its maps in the compact encoding. */
type InboxRecord =
  | Exclude<InboxMessage, { kind: 'cluster-state' }>
  | (Omit<Extract<InboxMessage, { kind: 'cluster-state' }>, 'maps'> & { readonly maps: readonly CompactSnapshot[] });

export type EventsMessage =
  /** Messages for some subscribers: the subscriptions to watchers, a dataset unknown or removed. */
  | { readonly format: 2; readonly kind: 'publish'; readonly epoch: Epoch; readonly to: readonly SubscriberId[]; readonly message: SubscriberMessage }
  /**
   * One decision's changes to a dataset's map, for every node: they turn the map at `base` into
   * the map at `(epoch, base.version + n)` (see the `PublishChanges` effect).
   */
  | {
      readonly format: 2;
      readonly kind: 'map-changes';
      readonly epoch: Epoch;
      readonly dataset: DatasetRef;
      readonly numShards: number;
      readonly base: { readonly epoch: Epoch; readonly version: number };
      readonly changes: EncodedEvents | PackedEvents;
      readonly members?: number;
    }
  /**
   * A whole map, compact, with the dataset's config: anyone behind on it may take it; `to` are the
   * subscribers that asked. The stamp is outside the map so a reader that has it decodes nothing.
   * `members` (both kinds): the members' version the map was made for; absent from a singleton of
   * an earlier release, whose maps are taken as made for any members.
   */
  | {
      readonly format: 2;
      readonly kind: 'map-snapshot';
      readonly epoch: Epoch;
      readonly dataset: DatasetRef;
      readonly numShards: number;
      readonly version: number;
      readonly to: readonly SubscriberId[];
      readonly config: DatasetConfig;
      readonly snapshot: CompactSnapshot | PackedSnapshot;
      readonly members?: number;
    }
  /** The member incarnations the maps are made for: a node acts on its map only while it is among them. */
  | { readonly format: 2; readonly kind: 'members'; readonly epoch: Epoch; readonly version: number; readonly members: readonly MemberIncarnation[] }
  /** How they changed: applies to the members at `version - 1` (see the `PublishMembersChange` effect). */
  | {
      readonly format: 2;
      readonly kind: 'members-change';
      readonly epoch: Epoch;
      readonly version: number;
      readonly joined: readonly MemberIncarnation[];
      readonly left: readonly MemberIncarnation[];
    }
  /** The periodic digest: every map's stamp and the members' version. */
  /**
   * `inbox`: every report before this inbox offset was applied or dropped (as an acknowledgement's
   * `inbox` says, for a singleton with nothing to acknowledge). Absent from an earlier release.
   * `acksSent`: the acknowledgements this singleton had sent when it wrote the digest; a node takes
   * `inbox` only once it has read them (they are on another topic, see `AckGate`).
   */
  | {
      readonly format: 2;
      readonly kind: 'digest';
      readonly epoch: Epoch;
      readonly members: number;
      readonly maps: readonly { readonly dataset: DatasetRef; readonly numShards: number; readonly version: number }[];
      readonly inbox?: number;
      readonly acksSent?: number;
    }
  | { readonly format: 2; readonly kind: 'fence'; readonly epoch: Epoch; readonly node: NodeId; readonly incarnation: Incarnation; readonly reason: string }
  /** A drained node holds no copy any more: it may stop (its operator or orchestrator decides when). */
  | { readonly format: 2; readonly kind: 'release'; readonly epoch: Epoch; readonly node: NodeId; readonly incarnation: Incarnation }
  /**
   * A new singleton asks every guardian for its cached maps, subscriptions and running shards.
   * `stored` lists the maps it already read from the MetaStore: a guardian leaves out every map
   * that is no newer than the one listed, so in the normal case (maps are persisted before they
   * are published) an answer carries no map at all.
   */
  | { readonly format: 2; readonly kind: 'cluster-state-request'; readonly epoch: Epoch; readonly requestId: string; readonly stored?: readonly MapStamp[] };

export type RepliesMessage =
  | { readonly format: 2; readonly kind: 'reply'; readonly epoch: Epoch; readonly to: ReplyTo; readonly reply: Reply }
  /**
   * `inbox`: the report's offset in the inbox. The singleton applies reports in inbox order, so
   * every node reading it learns that every report before that offset was applied or dropped (a
   * report of its own there and not acknowledged was lost), and that the singleton is moving on.
   * Absent from a singleton of an earlier release. `ordinal`: this acknowledgement's number among
   * its singleton's (from 1), which digests count.
   */
  | {
      readonly format: 2;
      readonly kind: 'ack';
      readonly epoch: Epoch;
      readonly node: NodeId;
      readonly incarnation: Incarnation;
      readonly seq: number;
      readonly inbox?: number;
      readonly ordinal?: number;
    };

/** A record that could not be read: what was wrong, for the log. */
export interface MalformedRecord {
  readonly reason: string;
}

// ------------------------------------------------------------------ encoding

/** An inbox message as it is produced: the maps of a recovery answer compact. */
export function encodeInboxMessage(m: InboxMessage): unknown {
  return m.kind === 'cluster-state' ? ({ ...m, maps: m.maps.map(encodeSnapshot) } satisfies InboxRecord) : m;
}

/** A reply as it is produced: a map in it compact (a map of 65 536 shards is megabytes otherwise). */
export function encodeRepliesMessage(m: RepliesMessage): unknown {
  if (m.kind === 'reply' && m.reply.type === 'CurrentShardSnapshot') return { ...m, reply: { ...m.reply, snapshot: encodeSnapshot(m.reply.snapshot) } };
  return m;
}

// ------------------------------------------------------------------ schemas

const id = <T>(parse: (raw: unknown) => Result<T, Error>) => z.custom<T>((v) => parse(v).ok, { message: 'malformed identifier' });
export const datasetRefS = id<DatasetRef>(parseDatasetRef);
export const nodeIdS = id<NodeId>(parseNodeId);
export const incarnationS = id<Incarnation>(parseIncarnation);
export const subscriberS = id<SubscriberId>(parseSubscriberId);
const replyToS = z
  .string()
  .min(1)
  .max(512)
  .transform((s) => s as ReplyTo);
/** A subscriber's newest whole-map format; an older singleton drops the field (`z.object` strips it) and writes what it writes. */
const mapFormatS = z.number().int().min(1).max(1_000_000).optional();
/** An HTTP client's `Idempotency-Key` (checked there too): a request sent again under it is applied once. */
const idempotencyKeyS = z
  .string()
  .regex(/^[A-Za-z0-9._:-]{1,128}$/)
  .optional();
const shardS = z.number().int().min(0);

const statusS = shardStatusSchema as unknown as z.ZodType<ShardStatus>;

const eventBase = { dataset: datasetRefS, shard: shardS, node: nodeIdS };
const eventS = z.discriminatedUnion('type', [
  z.object({ type: z.literal('ShardAssignmentStarted'), ...eventBase }),
  z.object({ type: z.literal('RecoveryInProgress'), progressPct: z.number(), ...eventBase }),
  z.object({ type: z.literal('IngestionStarted'), ...eventBase }),
  z.object({
    type: z.literal('IngestionError'),
    error: z.string(),
    token: z.object({ epoch: z.number().int().min(0), version: z.number().int().min(0) }).optional(),
    ...eventBase,
  }),
  z.object({ type: z.literal('IngestionStopped'), ...eventBase }),
  z.object({ type: z.literal('ShardDown'), ...eventBase }),
  z.object({ type: z.literal('ShardCopyAdded'), ...eventBase }),
  z.object({ type: z.literal('ShardLeaving'), ...eventBase }),
  z.object({ type: z.literal('ShardLeavingCancelled'), ...eventBase }),
  z.object({ type: z.literal('ShardLeft'), ...eventBase }),
  z.object({ type: z.literal('ShardCopyDown'), ...eventBase }),
]);

const requestS = z.discriminatedUnion('type', [
  z.object({ type: z.literal('SetupDataset'), config: z.unknown(), replyTo: replyToS, idempotencyKey: idempotencyKeyS }),
  z.object({ type: z.literal('RemoveDataset'), dataset: datasetRefS, replyTo: replyToS, idempotencyKey: idempotencyKeyS }),
  z.object({ type: z.literal('Subscribe'), subscriber: subscriberS, dataset: datasetRefS, mapFormat: mapFormatS }),
  z.object({ type: z.literal('SubscribeAll'), subscriber: subscriberS }),
  z.object({ type: z.literal('Unsubscribe'), subscriber: subscriberS, dataset: datasetRefS.optional() }),
  z.object({ type: z.literal('SubscriberTerminated'), subscriber: subscriberS }),
  z.object({
    type: z.literal('SyncMaps'),
    subscriber: subscriberS,
    datasets: z.union([z.literal('all'), z.array(datasetRefS).max(10_000)]),
    members: z.boolean(),
    mapFormat: mapFormatS,
  }),
  z.object({ type: z.literal('GetShardMap'), dataset: datasetRefS, replyTo: replyToS }),
  z.object({ type: z.literal('ListRegisteredDatasets'), replyTo: replyToS }),
  z.object({
    type: z.literal('StartShards'),
    dataset: datasetRefS,
    node: z.string(),
    shards: z.array(z.number()),
    replyTo: replyToS,
    idempotencyKey: idempotencyKeyS,
  }),
  z.object({ type: z.literal('StopShards'), dataset: datasetRefS, shards: z.array(z.number()), replyTo: replyToS, idempotencyKey: idempotencyKeyS }),
  z.object({ type: z.literal('RemoveNode'), node: z.string(), replyTo: replyToS, idempotencyKey: idempotencyKeyS }),
  z.object({ type: z.literal('ReplaceNode'), old: z.string(), new: z.string(), replyTo: replyToS, idempotencyKey: idempotencyKeyS }),
  z.object({ type: z.literal('AddNode'), node: z.string(), replyTo: replyToS, idempotencyKey: idempotencyKeyS }),
  z.object({ type: z.literal('GetNodeOperations'), replyTo: replyToS }),
  z.object({ type: z.literal('DescribeCluster'), replyTo: replyToS, dataset: datasetRefS.optional() }),
  z.object({ type: z.literal('ExplainPlacement'), dataset: datasetRefS, replyTo: replyToS }),
  z.object({ type: z.literal('SetLoadBalancing'), dataset: datasetRefS, paused: z.boolean(), replyTo: replyToS, idempotencyKey: idempotencyKeyS }),
]);

/** The most copies one load report carries: a dataset's shards. */
const MAX_LOAD_FIGURES = 65_536;
/** Figures as they travel: each is checked by the singleton, which counts what it refuses (a NaN arrives as null). */
const figuresS = z.array(z.unknown()).max(MAX_LOAD_FIGURES);

const loadReportS = z.object({
  node: nodeIdS,
  incarnation: incarnationS,
  dataset: datasetRefS,
  at: z.number(),
  windowMs: z.number().int().min(1),
  shards: z.array(z.number().int().min(0)).max(MAX_LOAD_FIGURES),
  records: figuresS,
  bytes: figuresS,
  sinkMs: figuresS,
  weights: figuresS.optional(),
});

export const stampsS = z
  .array(
    z.object({
      dataset: datasetRefS,
      numShards: z.number().int().min(1),
      epoch: z.number().int().min(0),
      version: z.number().int().min(0),
    }),
  )
  .refine((stamps) => new Set(stamps.map((x) => x.dataset)).size === stamps.length, 'a dataset is listed twice');

const inboxS = z.discriminatedUnion('kind', [
  z.object({ format: z.literal(WIRE_FORMAT), kind: z.literal('request'), request: requestS }),
  z.object({ format: z.literal(WIRE_FORMAT), kind: z.literal('takeover'), epoch: z.number().int().min(0) }),
  z.object({ format: z.literal(WIRE_FORMAT), kind: z.literal('loads'), report: loadReportS }),
  z.object({
    format: z.literal(WIRE_FORMAT),
    kind: z.literal('report'),
    node: nodeIdS,
    incarnation: incarnationS,
    seq: z.number().int().min(0),
    events: z.array(eventS).max(MAX_EVENTS_PER_REPORT),
  }),
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
    mapFormat: mapFormatS,
  }),
]);

export function firstIssue(e: z.ZodError): string {
  const i = e.issues[0];
  return `${i?.path.join('.') || '(root)'}: ${i?.message ?? 'invalid'}`;
}

export function checkFormat(value: unknown): string | undefined {
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
      const snap = decodeSnapshot(raw);
      if (!snap.ok) return err({ reason: snap.error.message });
      maps.push(snap.value);
    }
    return ok({ ...m, format: WIRE_FORMAT, epoch: m.epoch as Epoch, maps });
  }
  if (m.kind === 'request' && m.request.type === 'SetupDataset') {
    const config = validateDatasetConfig(m.request.config);
    if (!config.ok) return ok({ kind: 'invalid-setup', replyTo: m.request.replyTo, message: config.error.message });
    return ok({
      format: WIRE_FORMAT,
      kind: 'request',
      request: {
        type: 'SetupDataset',
        config: config.value,
        replyTo: m.request.replyTo,
        ...(m.request.idempotencyKey === undefined ? {} : { idempotencyKey: m.request.idempotencyKey }),
      },
    });
  }
  return ok(m as InboxMessage);
}

/** Absent, or a whole number from 0 (an offset, a count). */
const optionalCount = (v: unknown): boolean => v === undefined || (Number.isSafeInteger(v) && (v as number) >= 0);

/** A `SetupDataset` whose config failed validation: answered with `BadSchema`. */
export interface InvalidSetup {
  readonly kind: 'invalid-setup';
  readonly replyTo: ReplyTo;
  readonly message: string;
}

export function parseRepliesMessage(value: unknown): Result<RepliesMessage, MalformedRecord> {
  const bad = checkFormat(value);
  if (bad) return err({ reason: bad });
  const m = value as RepliesMessage;
  if (typeof m.epoch !== 'number') return err({ reason: 'no epoch' });
  if (m.kind === 'ack')
    return typeof m.node === 'string' && Number.isInteger(m.seq) && optionalCount(m.inbox) && optionalCount(m.ordinal)
      ? ok(m)
      : err({ reason: 'malformed ack' });
  if (m.kind !== 'reply') return err({ reason: `unknown kind ${JSON.stringify((m as { kind?: unknown }).kind)}` });
  if (typeof m.to !== 'string' || typeof m.reply?.type !== 'string') return err({ reason: 'malformed reply' });
  if (m.reply.type !== 'CurrentShardSnapshot') return ok(m);
  const snapshot = decodeSnapshot(m.reply.snapshot);
  return snapshot.ok ? ok({ ...m, reply: { type: 'CurrentShardSnapshot', snapshot: snapshot.value } }) : err({ reason: snapshot.error.message });
}

/** The subscriber-id prefix of everything a node incarnation hosts: `<node>@<incarnation>/`. */
export const hostPrefix = (node: NodeId, incarnation: Incarnation): string => `${node}@${incarnation}/`;

/** The member a subscriber id or reply address belongs to, if it follows the `<node>@<incarnation>/` convention. */
export function hostOf(address: string): { node: string; incarnation: string } | undefined {
  const m = /^([^@/]+)@([^/]+)\//.exec(address);
  return m ? { node: m[1]!, incarnation: m[2]! } : undefined;
}
