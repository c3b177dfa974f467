// What a bus subscription does with each record it fetched, whichever client library fetched it:
// joins chunked messages, passes over what its labels say to skip, decodes the JSON and hands it to
// the handler, one record at a time, reporting what cannot be read.
import type { Logger } from 'pino';
import { decodeLabels, type BusRecord, type RecordHandler, type SubscribeOptions } from '../bus.js';
import { ChunkedReader } from '../chunked-reader.js';
import type { Clock } from '../clock.js';
import { processEventLoopSlice } from '../event-loop-slice.js';
import { readChunkHeaders, readLabelsHeader } from './chunks.js';
import { KafkaBusError } from './errors.js';
import type { KafkaBusSettings } from './settings.js';

/** Chunked messages being passed over at most (their ids); far more than ever interleave. */
const MAX_SKIPPED_MESSAGES = 256;

export interface RecordReaderParams {
  readonly topic: string;
  readonly group: string;
  readonly handler: RecordHandler;
  readonly onError: SubscribeOptions['onError'];
  readonly skip: SubscribeOptions['skip'];
  readonly settings: KafkaBusSettings;
  readonly log: Logger;
  /** The bus's clock: the chunk timeout's time. */
  readonly clock: Clock;
}

/** A fetched record: its offset, value and headers (a header's value as a Buffer, or an array of them when repeated). */
export interface FetchedBusRecord {
  readonly offset: number;
  readonly value: Buffer | null;
  readonly headers: Readonly<Record<string, unknown>> | undefined;
}

/** Reads one subscription's records in offset order. */
export class BusRecordReader {
  /** The chunked messages this subscription is assembling: slices of their JSON bytes. */
  private readonly chunks: ChunkedReader<Buffer>;
  /** Chunked messages passed over at their first chunk (`SubscribeOptions.skip`): their other chunks are too. */
  private readonly skippedMessages = new Set<string>();
  /** A fetched batch is read in slices of the event loop's time, not in one task (`EventLoopSlice`). */
  private readonly slice = processEventLoopSlice();
  /** Stops waiting for the handler in flight, if any. */
  private abandonInFlight: (() => void) | undefined;
  private closed = false;

  constructor(private readonly p: RecordReaderParams) {
    this.chunks = new ChunkedReader<Buffer>({
      topic: p.topic,
      clock: p.clock,
      limits: p.settings,
      report: (error, record) => {
        p.log.warn(
          { event: 'bus.message.incomplete', offset: record.offset, reason: error instanceof Error ? error.message : String(error) },
          'chunked bus message given up',
        );
        this.report(error, record);
      },
    });
  }

  /** The offset a commit of `offset` may go to: never past a message still being assembled (the group's next owner must read it whole). */
  commitLimit(offset: number): number {
    const capped = this.chunks.commitLimit(offset);
    if (capped < offset) this.p.log.debug({ event: 'bus.commit.capped', offset, committed: capped }, 'commit held at the first chunk of an incomplete message');
    return capped;
  }

  /** Stops reading: the handler in flight is no longer waited for, and nothing more is delivered. */
  close(): void {
    this.closed = true;
    this.chunks.close();
    this.abandonInFlight?.();
  }

  /**
   * Reads one record; resolves once it is handled (or abandoned by `close`). Gives the event loop
   * a turn first when the batch has held it for a slice.
   */
  async read({ offset, value: raw, headers }: FetchedBusRecord): Promise<void> {
    await this.slice.yieldIfSpent();
    if (this.closed) return;
    const { topic } = this.p;
    let bytes = raw;
    let what = `record ${offset}`;
    const read = readChunkHeaders(headers);
    if (read.kind === 'malformed') return this.malformed(offset, `record ${offset} of ${topic} is not a chunk: ${read.reason}`, raw);
    if (this.passesOver(read, headers)) return;
    if (read.kind === 'chunk') {
      if (raw === null) return this.malformed(offset, `record ${offset} of ${topic} is a chunk without a value`, raw);
      const outcome = this.chunks.read({ position: read.position, offset, piece: raw, bytes: raw.length });
      if (outcome.kind === 'invalid') return this.malformed(offset, `record ${offset} of ${topic} is not a chunk: ${outcome.reason}`, raw);
      if (outcome.kind === 'duplicate' || outcome.kind === 'finished') {
        // A chunk seen already, or of a message delivered or given up (and reported) before.
        this.p.log.debug({ event: 'bus.chunk.ignored', offset, id: read.position.id, index: read.position.index, why: outcome.kind }, 'bus chunk ignored');
        return;
      }
      if (outcome.kind === 'waiting') return;
      bytes = Buffer.concat(outcome.pieces, outcome.bytes);
      what = `message ${outcome.id} (${outcome.pieces.length} chunks, the last at offset ${offset})`;
    }
    const text = bytes === null ? null : bytes.toString('utf8');
    let value: unknown;
    try {
      if (text === null) throw new Error('the record has no value');
      value = JSON.parse(text);
    } catch (e) {
      return this.malformed(offset, `${what} of ${topic} is not JSON: ${e instanceof Error ? e.message : String(e)}`, bytes, e);
    }
    const record: BusRecord = { topic, offset, value };
    // close() ends this wait: it must not wait for a handler that never returns (a paused or dead
    // node's handler waits on its gate), and the consumer leaves its group only after this returns.
    await new Promise<void>((resolve) => {
      this.abandonInFlight = resolve; // before the handler runs: it may call close() itself
      void this.deliver(record).then(resolve);
    });
    this.abandonInFlight = undefined;
  }

  /**
   * Whether the record is passed over unread: its labels say the handler needs nothing from it. A
   * chunked message is judged at its first chunk, so that it is passed over or read whole.
   */
  private passesOver(read: ReturnType<typeof readChunkHeaders>, headers: Readonly<Record<string, unknown>> | undefined): boolean {
    const { skip } = this.p;
    if (!skip) return false;
    if (read.kind === 'chunk') {
      const { id, index, count } = read.position;
      if (this.skippedMessages.has(id)) {
        if (index === count - 1) this.skippedMessages.delete(id);
        return true;
      }
      if (index !== 0) return false;
    }
    const json = readLabelsHeader(headers);
    const labels = json === undefined ? undefined : decodeLabels(json);
    if (!labels || !skip(labels)) return false;
    if (read.kind === 'chunk' && read.position.count > 1) {
      // Bounded: a message whose last chunk never comes must not hold its id for ever.
      if (this.skippedMessages.size >= MAX_SKIPPED_MESSAGES) this.skippedMessages.delete(this.skippedMessages.values().next().value!);
      this.skippedMessages.add(read.position.id);
    }
    return true;
  }

  private async deliver(record: BusRecord): Promise<void> {
    this.chunks.handlerStarted();
    try {
      await this.p.handler(record);
    } catch (error) {
      this.report(error, record);
    } finally {
      this.chunks.handlerEnded();
    }
  }

  /** A record (or a chunked message) that cannot be read: reported as `MALFORMED_RECORD` with its raw text, and skipped. */
  private malformed(offset: number, reason: string, raw: Buffer | null, cause?: unknown): void {
    const { topic, group } = this.p;
    const error = new KafkaBusError('MALFORMED_RECORD', reason, { topic, group, cause });
    this.p.log.warn({ event: 'bus.malformed', offset, reason }, 'malformed bus record skipped');
    this.report(error, { topic, offset, value: raw === null ? null : raw.toString('utf8') });
  }

  private report(error: unknown, record: BusRecord): void {
    if (!this.p.onError) {
      this.p.log.warn({ event: 'bus.handler.failed', offset: record.offset, err: error }, 'bus record not handled (no onError)');
      return;
    }
    try {
      this.p.onError(error, record);
    } catch (e) {
      this.p.log.warn({ err: e, offset: record.offset }, 'onError threw');
    }
  }
}
