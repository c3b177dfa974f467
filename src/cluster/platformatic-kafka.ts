// What every shardherd client on @platformatic/kafka shares: loading the library, the options made
// from a `KafkaConnection`, and reading a topic's partition count (the library reports an unknown
// topic as a plain user error, so the topic list has the last word).
import type { Admin, BaseOptions, Consumer, Producer } from '@platformatic/kafka';
import type { KafkaConnection } from './kafka-client.js';
import { ShardherdError } from '../core/errors.js';
import { isRetriableKafkaError, retryRetriable } from './kafka-retry.js';

export type PlatformaticKafka = typeof import('@platformatic/kafka');

let loading: Promise<PlatformaticKafka> | undefined;

/**
 * The library, loaded once per process. Loading it takes about half a second of the event loop
 * (more on a busy machine): a component that uses it starts loading it when it is made and awaits
 * it before it joins anything that watches its liveness.
 */
export function loadPlatformaticKafka(): Promise<PlatformaticKafka> {
  loading ??= import('@platformatic/kafka');
  return loading;
}

/** The library's client options for a connection. */
export function platformaticOptions(connection: KafkaConnection): BaseOptions {
  return {
    clientId: connection.clientId,
    bootstrapBrokers: [...connection.brokers],
    connectTimeout: connection.connectionTimeoutMs ?? 3_000,
    // The library's `timeout` is what a broker may take for an operation (a produce's acks); `requestTimeout` is the client's wait for an answer.
    ...(connection.requestTimeoutMs === undefined ? {} : { requestTimeout: connection.requestTimeoutMs }),
  };
}

/** True when @platformatic/kafka's error, or one it carries, is Kafka's error `apiId` (e.g. `UNKNOWN_TOPIC_OR_PARTITION`). */
export function hasPlatformaticKafkaError(e: unknown, apiId: string): boolean {
  const found = (e as { findBy?: (property: string, value: unknown) => unknown } | undefined)?.findBy?.('apiId', apiId);
  return found !== undefined && found !== null;
}

/** Kafka's error code for a topic that exists already. */
const TOPIC_ALREADY_EXISTS = 36;
/** Kafka's error code of a fetch below the log's start (retention removed the records). */
export const OFFSET_OUT_OF_RANGE = 1;
/** The attribute bit of a record batch of control records (transaction markers): no reader sees them. */
export const CONTROL_BATCH = 0x20;

/** One topic's part of an admin answer: Kafka's error code and message for it. */
export interface TopicAnswer {
  readonly name?: string;
  readonly errorCode?: number;
  readonly errorMessage?: string | null;
}

/**
 * The per-topic answers a failed admin request carries: the library fails the whole request on
 * any topic's error, with each broker answer (its topics) inside. Undefined for one that has none.
 */
export function topicAnswersOf(error: unknown): TopicAnswer[] | undefined {
  const topics = (error as { response?: { topics?: unknown } } | undefined)?.response?.topics;
  return Array.isArray(topics) ? (topics as TopicAnswer[]) : undefined;
}

/**
 * Whether a failed CreateTopics only found topics that exist already (another process created
 * them since the topic list was read).
 */
export function onlyExistingTopics(e: unknown): boolean {
  const answers = (e as { errors?: unknown } | undefined)?.errors;
  if (!Array.isArray(answers) || answers.length === 0) return false;
  return answers.every((answer) => topicAnswersOf(answer)?.every((t) => t.errorCode === 0 || t.errorCode === TOPIC_ALREADY_EXISTS) ?? false);
}

/** Whether the topic exists, by the cluster's topic list. */
export async function platformaticTopicExists(admin: Admin, topic: string): Promise<boolean> {
  return (await retryRetriable(() => admin.listTopics({ includeInternals: false }), isRetriableKafkaError)).includes(topic);
}

/** The topic's partition count, or undefined when it does not exist. */
export async function platformaticPartitionCount(client: Consumer | Producer | Admin, admin: Admin, topic: string): Promise<number | undefined> {
  try {
    const metadata = await client.metadata({ topics: [topic], forceUpdate: true });
    return metadata.topics.get(topic)?.partitionsCount;
  } catch (e) {
    // The library reports an unknown topic as a plain user error; the topic list says whether it is one.
    if (!(await platformaticTopicExists(admin, topic))) return undefined;
    throw e;
  }
}

/** The versions of a Kafka API the library speaks: its exported implementations (`fetchV4` … `fetchV17` for `Fetch`). */
function spokenVersions(library: PlatformaticKafka, api: string): number[] {
  const prefix = `${api.charAt(0).toLowerCase()}${api.slice(1)}V`;
  return Object.keys(library)
    .filter((k) => k.startsWith(prefix) && /^\d+$/.test(k.slice(prefix.length)))
    .map((k) => Number(k.slice(prefix.length)))
    .sort((a, b) => a - b);
}

/**
 * Resolves when the broker serves, for each of `apis` (Kafka's names: `Fetch`, `Produce`, …), a
 * version the library speaks. Otherwise throws an `UNSUPPORTED_BROKER` `ShardherdError` naming
 * `setting`, the client library option to change: asked at start, a broker too old for the library
 * stops the component before it joins anything, instead of failing its first fetch or write.
 * Errors reaching the broker are the library's own.
 */
export async function requireBrokerApis(
  client: Admin | Consumer | Producer,
  library: PlatformaticKafka,
  {
    apis,
    setting,
    brokers,
    clientId,
  }: { readonly apis: readonly string[]; readonly setting: string; readonly brokers: readonly string[]; readonly clientId: string },
): Promise<void> {
  let onlyV0 = false;
  const served = await client.listApis().catch(async (e: unknown) => {
    if (isRetriableKafkaError(e)) throw e;
    // The library asks ApiVersions v3, then v1; a broker older than Kafka 0.11 refuses both with an
    // answer the library cannot read. Every broker since Kafka 0.10 answers v0.
    const v0 = await apiVersionsV0(library, brokers[0] ?? '', clientId).catch(() => Promise.reject(e instanceof Error ? e : new Error(String(e))));
    onlyV0 = true;
    return v0;
  });
  // Such a broker is beyond the library whatever else it serves: its clients cannot ask it which versions to use.
  const unasked = onlyV0 ? ['ApiVersions only v0 (the library asks v1 or later before any request)'] : [];
  const lacking = unasked.concat(
    apis.flatMap((api) => {
      const spoken = spokenVersions(library, api);
      const at = served.find((a) => a.name === api);
      if (at !== undefined && spoken.some((v) => v >= at.minVersion && v <= at.maxVersion)) return [];
      const speaks = `v${spoken[0]}–v${spoken[spoken.length - 1]}`;
      return [`${api} ${at === undefined ? 'not at all' : `only v${at.minVersion}–v${at.maxVersion}`} (the library speaks ${speaks})`];
    }),
  );
  if (lacking.length === 0) return;
  throw new ShardherdError(
    'UNSUPPORTED_BROKER',
    `${setting} "platformatic": @platformatic/kafka cannot work with the broker it asked of ${brokers.join(', ')}, ` +
      `which serves ${lacking.join(', ')}. @platformatic/kafka needs Kafka 3.5 or later (shardherd is tested on 3.9 and 4.4); ` +
      `set ${setting} to "kafkajs", which speaks older protocol versions, or upgrade the brokers`,
  );
}

/** The broker's answer to ApiVersions v0, asked on a connection of its own to `broker` (`host:port`). */
async function apiVersionsV0(
  library: PlatformaticKafka,
  broker: string,
  clientId: string,
): Promise<readonly { name: string; minVersion: number; maxVersion: number }[]> {
  const colon = broker.lastIndexOf(':');
  const connection = new library.Connection(clientId);
  try {
    await connection.connect(broker.slice(0, colon), Number(broker.slice(colon + 1)));
    return (await library.apiVersionsV0.api.async(connection, 'shardherd', '0')).apiKeys;
  } finally {
    await connection.close();
  }
}
