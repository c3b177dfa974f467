// The failure detector's messages (docs/ARCHITECTURE.md §11.2–§11.5) and the first check every
// received frame goes through: JSON of this format and schema, of this cluster. What a frame means
// to its receiver (the right incarnation, a current epoch, an outstanding heartbeat) is checked by
// the receiver, which knows; every refusal has a cause from `DropCause`.
import { z } from 'zod';
import { parseIncarnation, parseNodeId, type Incarnation, type NodeId } from '../../core/ids.js';
import { err, ok, type Result } from '../../core/result.js';
import { type MemberRef, type Vote, VOTES } from '../../core/failure-detection/member-ref.js';

export { memberKey, memberRef, sameMember, VOTES, type MemberRef, type Vote } from '../../core/failure-detection/member-ref.js';

/** The format of a detector frame; a reader refuses any other. */
export const DETECTOR_FORMAT = 1;
/** The largest frame, in UTF-8 bytes with its newline: a message is about 200 bytes. */
export const MAX_FRAME_BYTES = 4096;

interface Envelope {
  readonly format: typeof DETECTOR_FORMAT;
  /** The cluster's name (topic prefix): a frame of another cluster is dropped. */
  readonly cluster: string;
  readonly from: MemberRef;
  readonly to: MemberRef;
  readonly seq: number;
}

export type DetectorMessage =
  /**
   * A node to the singleton: renew my lease. `stalledMs`: how late the node's own timer fired just
   * before (its event loop did not run): that stall is not counted as silence (§11.5). Optional, so
   * frames of older nodes still parse.
   */
  | (Envelope & { readonly type: 'heartbeat'; readonly stalledMs?: number })
  /** The singleton's answer: the lease runs `leaseMs` from the heartbeat's sending, under `epoch`. */
  | (Envelope & { readonly type: 'grant'; readonly epoch: number; readonly leaseMs: number; readonly heartbeatIntervalMs: number })
  /** The singleton's answer to an incarnation it evicted: restart as a new one. */
  | (Envelope & { readonly type: 'evicted'; readonly epoch: number })
  /** A direct probe, and its answer. */
  | (Envelope & { readonly type: 'ping' })
  | (Envelope & { readonly type: 'ack' })
  /** The singleton asks a helper to probe `target` at `address` (SWIM's indirect probe). */
  | (Envelope & { readonly type: 'ping-req'; readonly epoch: number; readonly target: MemberRef; readonly address: string })
  /** The helper's answer: what its probe of `target` saw. */
  | (Envelope & { readonly type: 'vote'; readonly target: MemberRef; readonly vote: Vote })
  /** A node that stops gracefully releases its lease before it leaves the group. */
  | (Envelope & { readonly type: 'goodbye' })
  /** The singleton of `epoch` tells a member where to send its heartbeats (§11.9: it may not be the oldest member). */
  | (Envelope & { readonly type: 'singleton'; readonly epoch: number; readonly address: string });

export type DetectorMessageType = DetectorMessage['type'];

/** Why a received frame was dropped (§11.10); each is counted and logged once. */
export const DROP_CAUSES = [
  /** Not JSON, or not a detector message of this format. */
  'malformed',
  /** Longer than `MAX_FRAME_BYTES`. */
  'too-large',
  /** Of another cluster (another topic prefix). */
  'foreign-cluster',
  /** Addressed to another incarnation (or node) than the receiver. */
  'wrong-addressee',
  /** From an incarnation other than the one the receiver lists for that node (usually an older one). */
  'stale-incarnation',
  /** Of an older epoch than the newest the receiver has seen. */
  'stale-epoch',
  /** A grant or ack answering nothing outstanding: a replay, or an answer that came too late. */
  'replayed',
  /** From a node the singleton does not list (yet): not answered. */
  'not-a-member',
  /** A heartbeat or vote sent to a node that does not host the singleton (any more). */
  'not-singleton',
  /**
   * Of an epoch far ahead of the newest the receiver has seen (more than `MAX_EPOCH_LEAP`): a grant,
   * an eviction, an announcement, or a singleton lease row read from the store. Accepting it would
   * make every genuine epoch look stale; it is never acted on.
   */
  'future-epoch',
  /**
   * The singleton lease row is renewed by an incarnation the group does not list. Counted, and not
   * trusted: nothing is taken before that lease has run out as any other (§11.9).
   */
  'holder-not-member',
  /**
   * The monotonic clock went backwards: every lease and wait measured on it is void (the node's
   * lease ends until the next grant, a successor's watch starts over).
   */
  'clock-jump',
] as const;
export type DropCause = (typeof DROP_CAUSES)[number];

export interface Dropped {
  readonly cause: DropCause;
  readonly detail: string;
}

const node = z.custom<NodeId>((v) => parseNodeId(v).ok, 'not a node id');
const inc = z.custom<Incarnation>((v) => parseIncarnation(v).ok, 'not an incarnation');
const member = z.strictObject({ node, incarnation: inc });
const count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const envelope = {
  format: z.literal(DETECTOR_FORMAT),
  cluster: z.string().min(1).max(200),
  from: member,
  to: member,
  seq: count,
};
/** @internal The schema itself (the check without zod is tested against it). */
export const detectorMessageSchema = z.discriminatedUnion('type', [
  z.strictObject({ ...envelope, type: z.literal('heartbeat'), stalledMs: z.number().int().nonnegative().max(3_600_000).optional() }),
  z.strictObject({
    ...envelope,
    type: z.literal('grant'),
    epoch: count,
    leaseMs: z.number().int().positive().max(3_600_000),
    heartbeatIntervalMs: z.number().int().positive().max(3_600_000),
  }),
  z.strictObject({ ...envelope, type: z.literal('evicted'), epoch: count }),
  z.strictObject({ ...envelope, type: z.literal('ping') }),
  z.strictObject({ ...envelope, type: z.literal('ack') }),
  z.strictObject({ ...envelope, type: z.literal('ping-req'), epoch: count, target: member, address: z.string().min(1).max(300) }),
  z.strictObject({ ...envelope, type: z.literal('vote'), target: member, vote: z.enum(VOTES) }),
  z.strictObject({ ...envelope, type: z.literal('goodbye') }),
  z.strictObject({ ...envelope, type: z.literal('singleton'), epoch: count, address: z.string().min(1).max(300) }),
]);

// ---------------------------------------------------------------- the check without zod
// Every received frame goes first through a hand-written check of the same schema, for frames that
// conform: the simulator carries hundreds of thousands of frames per run, and zod's parse was most
// of their cost. A frame it does not accept still goes to zod, which refuses it with its reason (or
// accepts it, should this check be stricter somewhere): what is accepted and refused, and why, is
// zod's either way. It must never accept a frame zod refuses, and must give what zod's parse gives
// (a fresh object, keys in the schema's order): test/unit/failure-detector-message-check.test.ts.

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
/** `z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)` */
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
/** `z.number().int().positive().max(3_600_000)` */
const isPositiveMs = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v > 0 && v <= 3_600_000;
const isString = (v: unknown, min: number, max: number): v is string => typeof v === 'string' && v.length >= min && v.length <= max;

/** Exactly these keys (a strict object), whatever their order: none missing, none more. */
function hasOnlyKeys(o: Json, keys: readonly string[]): boolean {
  let n = 0;
  // A parsed object's keys are all its own (JSON.parse makes even `__proto__` an own key).
  for (const k in o) {
    if (!keys.includes(k)) return false;
    n++;
  }
  return n === keys.length;
}

const MEMBER_KEYS = ['node', 'incarnation'];

/** The member, rebuilt as zod's strict object would give it, or undefined. */
function conformingMember(v: unknown): MemberRef | undefined {
  if (!isObject(v) || !hasOnlyKeys(v, MEMBER_KEYS)) return undefined;
  if (!parseNodeId(v.node).ok || !parseIncarnation(v.incarnation).ok) return undefined;
  return { node: v.node as MemberRef['node'], incarnation: v.incarnation as MemberRef['incarnation'] };
}

const ENVELOPE_KEYS = ['format', 'cluster', 'from', 'to', 'seq', 'type'];
/** A heartbeat that reports a stall has this key more; one that does not, the envelope's only. */
const HEARTBEAT_STALL_KEYS = [...ENVELOPE_KEYS, 'stalledMs'];
/** Each type's keys: the envelope's, then its own in the schema's order. */
const KEYS: Record<DetectorMessage['type'], readonly string[]> = {
  heartbeat: ENVELOPE_KEYS,
  grant: [...ENVELOPE_KEYS, 'epoch', 'leaseMs', 'heartbeatIntervalMs'],
  evicted: [...ENVELOPE_KEYS, 'epoch'],
  ping: ENVELOPE_KEYS,
  ack: ENVELOPE_KEYS,
  'ping-req': [...ENVELOPE_KEYS, 'epoch', 'target', 'address'],
  vote: [...ENVELOPE_KEYS, 'target', 'vote'],
  goodbye: ENVELOPE_KEYS,
  singleton: [...ENVELOPE_KEYS, 'epoch', 'address'],
};

/**
 * The message `json` is, if it conforms to the detector schema, built as zod builds its output (a
 * fresh object, keys in the schema's order); undefined if it does not (or this check cannot tell).
 */
export function conformingMessage(json: unknown): DetectorMessage | undefined {
  if (!isObject(json)) return undefined;
  const t = json.type;
  if (typeof t !== 'string' || !Object.hasOwn(KEYS, t)) return undefined;
  const stallReported = t === 'heartbeat' && Object.hasOwn(json, 'stalledMs');
  if (!hasOnlyKeys(json, stallReported ? HEARTBEAT_STALL_KEYS : KEYS[t as DetectorMessage['type']])) return undefined;
  const { cluster, seq } = json;
  if (json.format !== DETECTOR_FORMAT || !isString(cluster, 1, 200) || !isCount(seq)) return undefined;
  const from = conformingMember(json.from);
  const to = conformingMember(json.to);
  if (!from || !to) return undefined;
  const format = DETECTOR_FORMAT;
  switch (t) {
    case 'heartbeat': {
      if (!stallReported) return { format, cluster, from, to, seq, type: t };
      const { stalledMs } = json;
      // `z.number().int().nonnegative().max(3_600_000)`
      if (typeof stalledMs !== 'number' || !Number.isSafeInteger(stalledMs) || stalledMs < 0 || stalledMs > 3_600_000) return undefined;
      return { format, cluster, from, to, seq, type: t, stalledMs };
    }
    case 'ping':
    case 'ack':
    case 'goodbye':
      return { format, cluster, from, to, seq, type: t };
    case 'grant': {
      const { epoch, leaseMs, heartbeatIntervalMs } = json;
      if (!isCount(epoch) || !isPositiveMs(leaseMs) || !isPositiveMs(heartbeatIntervalMs)) return undefined;
      return { format, cluster, from, to, seq, type: t, epoch, leaseMs, heartbeatIntervalMs };
    }
    case 'evicted': {
      const { epoch } = json;
      if (!isCount(epoch)) return undefined;
      return { format, cluster, from, to, seq, type: t, epoch };
    }
    case 'ping-req': {
      const { epoch, address } = json;
      const target = conformingMember(json.target);
      if (!isCount(epoch) || !target || !isString(address, 1, 300)) return undefined;
      return { format, cluster, from, to, seq, type: t, epoch, target, address };
    }
    case 'vote': {
      const vote = json.vote;
      const target = conformingMember(json.target);
      if (!target || typeof vote !== 'string' || !(VOTES as readonly string[]).includes(vote)) return undefined;
      return { format, cluster, from, to, seq, type: t, target, vote: vote as Vote };
    }
    case 'singleton': {
      const { epoch, address } = json;
      if (!isCount(epoch) || !isString(address, 1, 300)) return undefined;
      return { format, cluster, from, to, seq, type: t, epoch, address };
    }
  }
  return undefined;
}

/** The frame of a message: its JSON and a newline. */
export function encodeFrame(message: DetectorMessage): string {
  return `${JSON.stringify(message)}\n`;
}

/**
 * Reads one frame (without its newline) received by a member of `cluster`: the message, or why it
 * is dropped. Only what needs no state is checked here: the size, JSON, the schema and the cluster.
 */
export function parseFrame(text: string, cluster: string): Result<DetectorMessage, Dropped> {
  // A UTF-16 code unit is at most 3 UTF-8 bytes: most frames are surely small enough uncounted.
  const bytes = text.length * 3 + 1 <= MAX_FRAME_BYTES ? 0 : Buffer.byteLength(text, 'utf8') + 1;
  if (bytes > MAX_FRAME_BYTES) return err({ cause: 'too-large', detail: `${bytes} bytes, at most ${MAX_FRAME_BYTES}` });
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return err({ cause: 'malformed', detail: `not JSON: ${JSON.stringify(text.slice(0, 80))}` });
  }
  const conforming = conformingMessage(json);
  if (conforming) return conforming.cluster === cluster ? ok(conforming) : foreign(conforming.cluster, cluster);
  const parsed = detectorMessageSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return err({ cause: 'malformed', detail: `${issue.path.map(String).join('.') || '(frame)'}: ${issue.message}` });
  }
  const message = parsed.data as DetectorMessage;
  if (message.cluster !== cluster) return foreign(message.cluster, cluster);
  return ok(message);
}

const foreign = (theirs: string, ours: string): Result<DetectorMessage, Dropped> =>
  err({ cause: 'foreign-cluster', detail: `of cluster ${JSON.stringify(theirs)}, this is ${JSON.stringify(ours)}` });
