// How the Kafka source buffers a fetched batch: its keys and values copied out of the fetch
// response into one buffer, decoded only when read. Messages here are built the way kafkajs hands
// them over: slices of one response buffer, framing bytes between them.
import type { KafkaMessage } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { decodeKafkaValue, utf8Text } from '../../src/ingest/kafka-source/decode.js';
import { fetchedMessages } from '../../src/ingest/kafka-source/feed-client.js';
import { FetchedRun, UndecodableRecord } from '../../src/ingest/kafka-source/fetched-run.js';
import type { SourceRecord } from '../../src/ingest/ingestion-source.js';

interface Part {
  readonly key: string | null;
  readonly value: string | null;
}

/** Messages whose keys and values are slices of one response buffer, `gap` framing bytes apart. */
function fetched(parts: readonly Part[], firstOffset = 100, gap = 7): { messages: KafkaMessage[]; response: Buffer } {
  const response = Buffer.alloc(
    parts.reduce((n, p) => n + 2 * gap + Buffer.byteLength(p.key ?? '') + Buffer.byteLength(p.value ?? ''), 0),
    0xee,
  );
  let at = 0;
  const slice = (text: string | null): Buffer | null => {
    at += gap;
    if (text === null) return null;
    const n = response.write(text, at);
    const b = response.subarray(at, at + n);
    at += n;
    return b;
  };
  const messages = parts.map(
    (p, i) =>
      ({
        offset: String(firstOffset + i),
        key: slice(p.key),
        value: slice(p.value),
        timestamp: '0',
        attributes: 0,
        headers: {},
        size: 0,
      }) as unknown as KafkaMessage,
  );
  return { messages, response };
}

/** Packs messages as the kafkajs client hands them over. */
const pack = (messages: readonly KafkaMessage[], maxRecords: number, byteBudget: number) => FetchedRun.pack(fetchedMessages(messages), maxRecords, byteBudget);

const all = (run: FetchedRun) => Array.from({ length: run.count }, (_, i) => run.record(i, decodeKafkaValue));

describe('FetchedRun', () => {
  it('reads back every record as the default decoder sees it: JSON parsed, text as text, null key as ""', () => {
    const { messages } = fetched([
      { key: 'k1', value: '{"n":1}' },
      { key: null, value: 'plain text' },
      { key: '', value: null },
      { key: 'clé ü', value: '"☃"' },
    ]);
    const run = pack(messages, 100, 1 << 20)!;
    expect(run.count).toBe(4);
    expect(all(run)).toEqual([
      { offset: 100, key: 'k1', value: { n: 1 } },
      { offset: 101, key: '', value: 'plain text' },
      { offset: 102, key: '', value: null },
      { offset: 103, key: 'clé ü', value: '☃' },
    ]);
    expect(run.lastOffset()).toBe(103);
  });

  it('keeps nothing of the fetch response: overwriting it changes no record', () => {
    const { messages, response } = fetched([
      { key: 'a', value: '[1,2]' },
      { key: 'b', value: 'x' },
    ]);
    const run = pack(messages, 100, 1 << 20)!;
    response.fill(0x20);
    expect(all(run).map((r) => [r.key, r.value])).toEqual([
      ['a', [1, 2]],
      ['b', 'x'],
    ]);
  });

  it('copies the records and the small framing between them, not what lies far apart or in other buffers', () => {
    const near = fetched(
      Array.from({ length: 100 }, (_, i) => ({ key: `k${i}`, value: `{"n":${i}}` })),
      0,
      10,
    );
    const run = pack(near.messages, 1000, 1 << 20)!;
    expect(run.bytes).toBeLessThan(near.response.length + 24 * 100 + 300);
    const far = fetched(
      [
        { key: 'a', value: '1' },
        { key: 'b', value: '2' },
      ],
      0,
      100_000,
    );
    const other = fetched([{ key: 'c', value: '3' }], 2);
    const mixed = pack([...far.messages, ...other.messages], 10, 1 << 20)!;
    expect(mixed.bytes).toBeLessThan(1000);
    expect(all(mixed).map((r) => [r.offset, r.key, r.value])).toEqual([
      [0, 'a', 1],
      [1, 'b', 2],
      [2, 'c', 3],
    ]);
  });

  it('takes at most maxRecords, and stops at the record that reaches the byte budget', () => {
    const { messages } = fetched(Array.from({ length: 50 }, (_, i) => ({ key: `k${i}`, value: 'v'.repeat(100) })));
    expect(pack(messages, 10, 1 << 20)!.count).toBe(10);
    const run = pack(messages, 50, 1_000)!;
    expect(run.count).toBeGreaterThan(1);
    expect(run.count).toBeLessThan(10);
    expect(pack(messages, 50, 1)!.count).toBe(1);
    expect(pack([], 50, 1 << 20)).toBeUndefined();
    expect(pack(messages, 0, 1 << 20)).toBeUndefined();
  });

  it('hands a custom decoder the value bytes, the key and the offset; what it throws names the record', () => {
    const { messages } = fetched([
      { key: 'k', value: 'ok' },
      { key: 'bad', value: 'nope' },
    ]);
    const run = pack(messages, 10, 1 << 20)!;
    const decode = (value: Buffer | null, key: string, offset: number) => {
      if (key === 'bad') throw new Error(`refused ${value?.toString()}`);
      return { text: value?.toString(), key, offset };
    };
    expect(run.record(0, decode)).toEqual({ offset: 100, key: 'k', value: { text: 'ok', key: 'k', offset: 100 } });
    const failure = (() => {
      try {
        run.record(1, decode);
      } catch (e) {
        return e;
      }
    })();
    expect(failure).toBeInstanceOf(UndecodableRecord);
    expect(failure).toMatchObject({ offset: 101, message: 'refused nope' });
  });

  it('reads records in bulk up to a maximum, stopping before a poison record and failing a read that starts at it', () => {
    const { messages } = fetched(['a', 'b', 'poison', 'c'].map((value, i) => ({ key: `k${i}`, value })));
    const run = pack(messages, 10, 1 << 20)!;
    const decode = (value: Buffer | null) => {
      if (value?.toString() === 'poison') throw new Error('not ours');
      return value?.toString();
    };
    const earlier: SourceRecord = { offset: 99, key: 'k', value: 'earlier' };
    const out = [earlier];
    expect(run.readInto(out, 0, 2, decode)).toBe(1);
    expect(out).toEqual([earlier, { offset: 100, key: 'k0', value: 'a' }]);
    const more: SourceRecord[] = [];
    expect(run.readInto(more, 1, 10, decode)).toBe(1);
    expect(more).toEqual([{ offset: 101, key: 'k1', value: 'b' }]);
    expect(() => run.readInto([], 2, 10, decode)).toThrow(UndecodableRecord);
    const tail: SourceRecord[] = [];
    expect(run.readInto(tail, 3, 10, decode)).toBe(1);
    expect(tail).toEqual([{ offset: 103, key: 'k3', value: 'c' }]);
  });
});

describe('FetchedRun reads of random records', () => {
  /** Texts that take each of the decoding's paths: ASCII or not, JSON or not, short or long, empty, whitespace. */
  const TEXTS = [
    '',
    ' ',
    'k',
    'k1234',
    'a-key-of-12c',
    'a-key-of-13ch',
    'a-longer-ascii-key-0123456789',
    'clé',
    'ключ-ключ-ключ',
    '☃',
    '{"n":1}',
    '{"name":"ü"}',
    ' [1,2,"☃"]',
    '-0.5',
    '12abc',
    '"quoted"',
    '"☃ unclosed',
    'null',
    'nul',
    'tomato',
    '{not json',
    '\u00e9',
  ];
  const pick = (random: () => number) => (random() < 0.1 ? null : TEXTS[Math.floor(random() * TEXTS.length)]!);
  /** The default decoding spelled out on its own: a value is its JSON if it parses, else its text. */
  const expected = (p: Part, offset: number): SourceRecord => {
    if (p.value === null) return { offset, key: p.key ?? '', value: null };
    let value: unknown;
    try {
      value = JSON.parse(p.value);
    } catch {
      value = p.value;
    }
    return { offset, key: p.key ?? '', value };
  };

  it('decodes 2 000 random runs, read in random slices, as the default decoding spelled out and as a decoder of its own sees them (keys and values of every kind)', () => {
    let seed = 7;
    // A small linear congruential generator: the same runs every time.
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let r = 0; r < 2_000; r++) {
      const parts = Array.from({ length: 1 + Math.floor(random() * 40) }, () => ({ key: pick(random), value: pick(random) }));
      const { messages } = fetched(parts, 1000, Math.floor(random() * 20));
      const run = pack(messages, 100, 1 << 20)!;
      const out: SourceRecord[] = [];
      for (let from = 0; from < run.count;) from += run.readInto(out, from, out.length + 1 + Math.floor(random() * 8), decodeKafkaValue);
      expect(out).toEqual(parts.map((p, i) => expected(p, 1000 + i)));
      // A decoder of its own sees the same keys and each value's bytes.
      const own: SourceRecord[] = [];
      for (let from = 0; from < run.count;)
        from += run.readInto(own, from, own.length + 1 + Math.floor(random() * 8), (value) => value?.toString('utf8') ?? null);
      expect(own).toEqual(parts.map((p, i) => ({ offset: 1000 + i, key: p.key ?? '', value: p.value })));
    }
  });
});

describe('utf8Text', () => {
  it('decodes exactly the byte range asked for, multi-byte characters included, as toString does', () => {
    const bytes = Buffer.from('ab☃cdé€z');
    for (let start = 0; start <= bytes.length; start++) {
      for (let end = start; end <= bytes.length; end++) expect(utf8Text(bytes, start, end)).toBe(bytes.toString('utf8', start, end));
    }
    expect(utf8Text(bytes, 2, 5)).toBe('☃');
  });
});

describe('decodeKafkaValue', () => {
  it.each([
    ['{"a":1}', { a: 1 }],
    [' \n\t[1]', [1]],
    ['-2.5', -2.5],
    ['true', true],
    ['null', null],
    ['tomato', 'tomato'],
    ['{not json', '{not json'],
    ['', ''],
    ['   ', '   '],
  ])('%j reads as %j', (text, expected) => {
    expect(decodeKafkaValue(Buffer.from(text))).toEqual(expected);
  });

  it('reads a null value (a tombstone) as null', () => {
    expect(decodeKafkaValue(null)).toBeNull();
  });
});
