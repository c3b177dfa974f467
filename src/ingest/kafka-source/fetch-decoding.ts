// Puts this project's decoder of record batches (./record-batches.ts) in the place of kafkajs's
// own, for every kafkajs consumer of the process: kafkajs has no option for its decoder, so the
// module it loads for it is replaced in Node's module cache. The replacement makes the same
// message objects (a property test compares the two on random batches), so nothing else in the
// process can tell, except by speed.
//
// Only the kafkajs version the decoder was compared against gets it: another version may make
// other objects, and keeps its own decoder (with a warning) until the comparison is run against it.
import { createRequire } from 'node:module';
import type { Logger } from 'pino';
import { recordBatchesDecoder, type DecodedBatchCounts, type KafkaDecoder, type KafkajsDecoding } from './record-batches.js';

/** Who can decode fetched record batches: this project's decoder, or kafkajs's own. */
export const FETCH_DECODERS = ['shardherd', 'kafkajs'] as const;
export type FetchDecoder = (typeof FETCH_DECODERS)[number];

/** The kafkajs release the decoder's objects were compared against (see the lockfile). */
const COMPARED_KAFKAJS_VERSION = '2.2.4';

const require = createRequire(import.meta.url);
const KAFKAJS_SRC = 'kafkajs/src/';
const DECODE_MESSAGES = `${KAFKAJS_SRC}protocol/requests/fetch/v4/decodeMessages.js`;
/** The fetch responses of every version load `decodeMessages` when they are first loaded. */
const FETCH_RESPONSE = /[\\/]kafkajs[\\/]src[\\/]protocol[\\/]requests[\\/]fetch[\\/]v\d+[\\/]response\.js$/;

type DecodeMessages = (decoder: KafkaDecoder) => Promise<unknown[]>;

/** kafkajs's decoder, once replaced (and so whether it is). */
let kafkajsOwn: DecodeMessages | undefined;

const counts: DecodedBatchCounts = { own: 0, kafkajs: 0 };

/** Which decoder this process's kafkajs consumers use now, and the record batches decoded since it was installed. */
export function fetchDecoding(): { readonly decoder: FetchDecoder; readonly batches: Readonly<DecodedBatchCounts> } {
  return { decoder: kafkajsOwn === undefined ? 'kafkajs' : 'shardherd', batches: { ...counts } };
}

/**
 * Makes this project's decoder kafkajs's, once per process; returns the decoder in use after the
 * call. Fetch responses kafkajs loaded before (they hold its decoder) are loaded again at their
 * next use. With another kafkajs release than the one compared, or a kafkajs whose modules are not
 * where Node loads them from (bundled into an application), nothing changes and `log` says why.
 */
export function installFetchDecoder(log: Logger): FetchDecoder {
  if (kafkajsOwn !== undefined) return 'shardherd';
  const kept = (why: string, fields: object) => {
    log.warn({ event: 'ingest.fetch-decoder', compared: COMPARED_KAFKAJS_VERSION, ...fields }, `kafkajs's own decoder of fetched records is kept: ${why}`);
    return 'kafkajs' as const;
  };
  let version: string;
  let cached: NodeJS.Module | undefined;
  let ours: DecodeMessages;
  try {
    version = (require('kafkajs/package.json') as { version: string }).version;
    if (version !== COMPARED_KAFKAJS_VERSION) return kept("shardherd's was compared against another kafkajs release", { kafkajs: version });
    const path = require.resolve(DECODE_MESSAGES);
    require(path);
    cached = require.cache[path];
    ours = recordBatchesDecoder(kafkajsDecoding(), counts);
  } catch (e) {
    return kept("kafkajs's modules could not be loaded (is kafkajs bundled into the application?)", { err: e });
  }
  if (cached === undefined) return kept(`kafkajs's ${DECODE_MESSAGES} is not in Node's module cache`, { kafkajs: version });
  kafkajsOwn = cached.exports as DecodeMessages;
  cached.exports = ours;
  for (const loaded of Object.keys(require.cache)) if (FETCH_RESPONSE.test(loaded)) delete require.cache[loaded];
  log.info(
    { event: 'ingest.fetch-decoder', kafkajs: version },
    "fetched Kafka records are decoded by shardherd's decoder of record batches (kafkajs's consumers see the same messages)",
  );
  return 'shardherd';
}

/** The parts of kafkajs the decoder hands work to. */
export function kafkajsDecoding(): KafkajsDecoding {
  const load = <T>(module: string) => require(`${KAFKAJS_SRC}${module}`) as T;
  return {
    Decoder: load<new (buffer: Buffer) => KafkaDecoder>('protocol/decoder.js'),
    Long: load<KafkajsDecoding['Long']>('utils/long.js'),
    decodeRecordBatch: load<KafkajsDecoding['decodeRecordBatch']>('protocol/recordBatch/v0/decoder.js'),
    decodeMessageSet: load<KafkajsDecoding['decodeMessageSet']>('protocol/messageSet/decoder.js'),
    isPartialMessageError: (e) => e instanceof Error && e.name === 'KafkaJSPartialMessageError',
    timestampTypes: load<KafkajsDecoding['timestampTypes']>('protocol/timestampTypes.js'),
  };
}

/** kafkajs's own `decodeMessages`, whether or not it was replaced: what the tests and the benchmark compare with. */
export function kafkajsDecodeMessages(): DecodeMessages {
  return kafkajsOwn ?? (require(DECODE_MESSAGES) as DecodeMessages);
}
