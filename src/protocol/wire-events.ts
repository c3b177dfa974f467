// How a record of the events topic is checked on arrival. Only the singleton writes there, so the
// envelopes, the changes and the snapshots are checked and the subscriber message bodies trusted.
//
// Every node reads every record of this topic. The embedded bus hands all its subscribers one
// frozen copy of a record, so a frozen value is checked once and its (frozen) result shared: the
// nodes of an embedded cluster, or of a simulated one, do not each check the same record. Values
// from Kafka are decoded per reader, never frozen, and checked each time.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { canonicalConfigJson, validateDatasetConfig, type DatasetConfig } from '../core/dataset-config.js';
import { parseDatasetRef } from '../core/ids.js';
import { eventsDecoding, snapshotDecoding } from '../core/map-codec.js';
import { runWhole, type Steps } from '../core/steps.js';
import { err, ok, type Result } from '../core/result.js';
import type { ShardMapSnapshot } from '../core/shard-map-snapshot.js';
import type { DatasetRef, Epoch } from '../core/ids.js';
import type { RecordLabels } from '../cluster/bus.js';
import type { ShardEvent } from '../core/status.js';
import { isValidShardCount } from '../core/spread.js';
import { InvalidSnapshotError } from '../core/errors.js';
import type { MapStamp } from '../core/shard-manager/protocol.js';
import { checkFormat, datasetRefS, firstIssue, incarnationS, nodeIdS, stampsS, type EventsMessage, type MalformedRecord } from './wire.js';

type MapChangesRecord = Extract<EventsMessage, { kind: 'map-changes' }>;
type MapSnapshotRecord = Extract<EventsMessage, { kind: 'map-snapshot' }>;

/** A record of the events topic as read: a map change's events decoded. */
export type EventsRecord = Exclude<EventsMessage, { kind: 'map-changes' }> | (MapChangesRecord & { readonly events: readonly ShardEvent[] });

const stampS = z.object({ epoch: z.number().int().min(0), version: z.number().int().min(0) });
const incarnationsS = z.array(z.object({ node: nodeIdS, incarnation: incarnationS }));
const membersS = z.object({ epoch: z.number().int().min(0), version: z.number().int().min(0), members: incarnationsS });
const membersChangeS = z.object({ epoch: z.number().int().min(0), version: z.number().int().min(1), joined: incarnationsS, left: incarnationsS });
const digestS = z.object({
  epoch: z.number().int().min(0),
  members: z.number().int().min(0),
  maps: z.array(z.object({ dataset: datasetRefS, numShards: z.number().refine(isValidShardCount), version: z.number().int().min(0) })),
  inbox: z.number().int().min(0).optional(),
  acksSent: z.number().int().min(0).optional(),
});

export function parseEventsMessage(value: unknown): Result<EventsRecord, MalformedRecord> {
  return runWhole(eventsMessageReading(value));
}

/**
 * `parseEventsMessage` in steps, to run in slices of the event loop: a decision's changes can be
 * tens of thousands of events. A frozen record (the embedded bus) is read once for every node.
 */
export function* eventsMessageReading(value: unknown): Steps<Result<EventsRecord, MalformedRecord>> {
  if (typeof value !== 'object' || value === null || !Object.isFrozen(value)) return yield* checkingEventsMessage(value);
  let parsed = parsedFrozen.get(value);
  if (!parsed) {
    parsed = yield* checkingEventsMessage(value);
    yield* freezing(parsed);
    parsedFrozen.set(value, parsed);
  }
  return parsed;
}

const parsedFrozen = new WeakMap<object, Result<EventsRecord, MalformedRecord>>();

/** Objects frozen between two steps: a whole map of 65 536 × 3 is about 800 000 (90 ms in one task). */
const FREEZES_PER_STEP = 4096;

/** Freezes a parse result all through, so that a reader that shares it cannot change it for the others. */
function* freezing(root: unknown): Steps<void> {
  const stack: unknown[] = [root];
  let frozen = 0;
  while (stack.length > 0) {
    const value = stack.pop();
    // Nobody sees the result before its last step: a frozen object here was frozen all through.
    if (typeof value !== 'object' || value === null || Object.isFrozen(value)) continue;
    Object.freeze(value);
    for (const child of Object.values(value)) stack.push(child);
    if (++frozen % FREEZES_PER_STEP === 0) yield;
  }
}

const isWhole = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;

function* checkingEventsMessage(value: unknown): Steps<Result<EventsRecord, MalformedRecord>> {
  const bad = checkFormat(value);
  if (bad) return err({ reason: bad });
  const m = value as EventsMessage;
  if (!isWhole(m.epoch)) return err({ reason: 'no epoch' });
  switch (m.kind) {
    case 'publish':
      return Array.isArray(m.to) && typeof m.message?.type === 'string' ? ok(m) : err({ reason: 'malformed publish' });
    case 'map-changes': {
      const where = checkMapEnvelope(m);
      if (where) return err({ reason: `malformed map-changes: ${where}` });
      const base = stampS.safeParse(m.base);
      if (!base.success) return err({ reason: `malformed map-changes: base.${firstIssue(base.error)}` });
      const events = yield* eventsDecoding(m.changes, m.dataset, m.numShards);
      return events.ok ? ok({ ...m, events: events.value }) : err({ reason: events.error.message });
    }
    case 'map-snapshot': {
      const where =
        checkMapEnvelope(m) ??
        (isWhole(m.version) ? undefined : 'version') ??
        (Array.isArray(m.to) && m.to.every((x) => typeof x === 'string') ? undefined : 'to');
      if (where) return err({ reason: `malformed map-snapshot: ${where}` });
      const config = validateDatasetConfig(m.config);
      if (!config.ok) return err({ reason: `malformed map-snapshot: config ${config.error.message}` });
      if (config.value.ref !== m.dataset || config.value.numShards !== m.numShards)
        return err({ reason: 'malformed map-snapshot: its config is of another dataset' });
      // The map itself is decoded when a reader needs it (`snapshotReading`): most readers have it already.
      return typeof m.snapshot === 'object' && m.snapshot !== null ? ok({ ...m, config: config.value }) : err({ reason: 'malformed map-snapshot: no map' });
    }
    case 'members': {
      const r = membersS.safeParse(m);
      return r.success ? ok(m) : err({ reason: `malformed members: ${firstIssue(r.error)}` });
    }
    case 'members-change': {
      const r = membersChangeS.safeParse(m);
      return r.success ? ok(m) : err({ reason: `malformed members-change: ${firstIssue(r.error)}` });
    }
    case 'digest': {
      const r = digestS.safeParse(m);
      return r.success ? ok(m) : err({ reason: `malformed digest: ${firstIssue(r.error)}` });
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

/** The first envelope field of a map record that is wrong, if any. */
function checkMapEnvelope(m: { dataset?: unknown; numShards?: unknown; members?: unknown }): string | undefined {
  if (!parseDatasetRef(m.dataset).ok) return 'dataset';
  if (typeof m.numShards !== 'number' || !isValidShardCount(m.numShards)) return 'numShards';
  if (m.members !== undefined && !isWhole(m.members)) return 'members';
  return undefined;
}

const decodedFrozen = new WeakMap<object, Result<ShardMapSnapshot, InvalidSnapshotError>>();

/**
 * The map of a `map-snapshot` record, decoded and checked (against its envelope too), in steps to
 * run whole or in slices of the event loop. A frozen record (the embedded bus) is decoded once for
 * every node of the process.
 */
export function* snapshotReading(m: MapSnapshotRecord): Steps<Result<ShardMapSnapshot, InvalidSnapshotError>> {
  const raw = m.snapshot as object;
  const cached = Object.isFrozen(raw) ? decodedFrozen.get(raw) : undefined;
  if (cached) return cached;
  let r = yield* snapshotDecoding(raw);
  if (r.ok && (r.value.dataset !== m.dataset || r.value.numShards !== m.numShards || r.value.epoch !== m.epoch || r.value.version !== m.version)) {
    r = err(
      new InvalidSnapshotError(
        `a map-snapshot of ${m.dataset} holds the map of ${r.value.dataset} (${r.value.numShards} shards) at ${r.value.epoch}/${r.value.version}, not ${m.numShards} shards at ${m.epoch}/${m.version}`,
        m.dataset,
      ),
    );
  }
  if (Object.isFrozen(raw)) {
    yield* freezing(r);
    decodedFrozen.set(raw, r);
  }
  return r;
}

/**
 * What a whole map's record says about itself in its labels, so that a node that needs nothing
 * from it passes it over unread (a 65 536 × 3 map is megabytes of JSON that every node parsed,
 * for each new node's sync, to find it had the map already).
 */
export interface SnapshotEnvelope {
  readonly dataset: DatasetRef;
  readonly numShards: number;
  readonly epoch: Epoch;
  readonly version: number;
  readonly members: number | undefined;
  /** The dataset's config, as `configFingerprint` gives it. */
  readonly config: string;
  /** The hosts (`node@incarnation/`) of the subscribers it is addressed to. */
  readonly toHosts: readonly string[];
}

/**
 * Fingerprints of the configs met so far, by object: every map snapshot a node reads and every one
 * the singleton labels asks for one, mostly of the same few config objects (a dataset's config is
 * never changed in place: a new config is a new object).
 */
const fingerprints = new WeakMap<DatasetConfig, string>();

/** A short fingerprint of a dataset's config: equal configs have equal ones, whatever the order of their keys. */
export function configFingerprint(config: DatasetConfig): string {
  let fingerprint = fingerprints.get(config);
  if (fingerprint === undefined) {
    fingerprint = createHash('sha1').update(canonicalConfigJson(config)).digest('base64url');
    fingerprints.set(config, fingerprint);
  }
  return fingerprint;
}

/**
 * The labels of a `map-snapshot` record; undefined when its subscribers' hosts would make them too
 * long (then every node reads it, as before labels).
 */
export function snapshotLabels(m: MapSnapshotRecord): RecordLabels | undefined {
  const toHosts = [...new Set(m.to.flatMap((id) => /^[^/]*\//.exec(id)?.[0] ?? []))];
  const labels = {
    kind: 'map-snapshot',
    dataset: m.dataset,
    numShards: String(m.numShards),
    epoch: String(m.epoch),
    version: String(m.version),
    ...(m.members === undefined ? {} : { members: String(m.members) }),
    config: configFingerprint(m.config),
    to: JSON.stringify(toHosts),
  };
  return JSON.stringify(labels).length <= MAX_SNAPSHOT_LABEL_CHARS ? labels : undefined;
}

/** Well within the bus's MAX_LABEL_BYTES: labels describe, they do not carry. */
const MAX_SNAPSHOT_LABEL_CHARS = 900;

/** The envelope a record's labels give, if they are a whole map's; anything else reads as undefined (the record is read). */
export function snapshotEnvelope(labels: RecordLabels): SnapshotEnvelope | undefined {
  if (labels.kind !== 'map-snapshot') return undefined;
  const whole = (v: string | undefined) => (v !== undefined && /^\d{1,15}$/.test(v) ? Number(v) : undefined);
  const dataset = parseDatasetRef(labels.dataset);
  const numShards = whole(labels.numShards);
  const epoch = whole(labels.epoch);
  const version = whole(labels.version);
  const members = labels.members === undefined ? undefined : whole(labels.members);
  let toHosts: unknown;
  try {
    toHosts = JSON.parse(labels.to ?? '');
  } catch {
    return undefined;
  }
  if (!dataset.ok || numShards === undefined || epoch === undefined || version === undefined || (labels.members !== undefined && members === undefined))
    return undefined;
  if (typeof labels.config !== 'string' || !Array.isArray(toHosts) || !toHosts.every((h) => typeof h === 'string')) return undefined;
  return { dataset: dataset.value, numShards, epoch: epoch as Epoch, version, members, config: labels.config, toHosts: toHosts as string[] };
}
