// Reassembly of chunked bus messages, on its own: what completes a message, what is ignored,
// what is given up and when, and how far a commit may go. Time is passed in by hand.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ChunkAssembler, type Chunk } from '../../src/cluster/chunk-assembly.js';

const TIMEOUT = 1_000;

function assembler(maxHeldBytes = 1_000_000): ChunkAssembler<string> {
  return new ChunkAssembler<string>({ timeoutMs: TIMEOUT, maxHeldBytes });
}

/** Chunk `index` of `count` of message `id` at `offset`, its piece naming itself, 10 bytes. */
function chunk(id: string, index: number, count: number, offset: number): Chunk<string> {
  return { position: { id, index, count }, offset, piece: `${id}${index}`, bytes: 10 };
}

describe('ChunkAssembler', () => {
  it('completes a message when its last missing chunk arrives, with the pieces in index order whatever the arrival order', () => {
    const a = assembler();
    expect(a.add(chunk('m', 2, 3, 10), 0).outcome).toEqual({ kind: 'waiting' });
    expect(a.add(chunk('m', 0, 3, 11), 0).outcome).toEqual({ kind: 'waiting' });
    expect(a.assembling).toBe(1);
    expect(a.heldBytes).toBe(20);
    expect(a.add(chunk('m', 1, 3, 12), 0).outcome).toEqual({ kind: 'complete', id: 'm', pieces: ['m0', 'm1', 'm2'], bytes: 30 });
    expect(a.assembling).toBe(0);
    expect(a.heldBytes).toBe(0);
  });

  it('a one-chunk message is complete at once', () => {
    expect(assembler().add(chunk('one', 0, 1, 0), 0).outcome).toMatchObject({ kind: 'complete', pieces: ['one0'] });
  });

  it('ignores a chunk it has, and any chunk of a message it delivered', () => {
    const a = assembler();
    a.add(chunk('m', 0, 2, 0), 0);
    expect(a.add(chunk('m', 0, 2, 1), 0).outcome).toEqual({ kind: 'duplicate' });
    expect(a.heldBytes).toBe(10);
    expect(a.add(chunk('m', 1, 2, 2), 0).outcome.kind).toBe('complete');
    expect(a.add(chunk('m', 1, 2, 3), 0).outcome).toEqual({ kind: 'finished' });
    expect(a.add(chunk('m', 0, 2, 4), 0).outcome).toEqual({ kind: 'finished' });
    expect(a.assembling).toBe(0); // no second, never-ending assembly of a delivered message
  });

  it('keeps interleaved messages apart', () => {
    const a = assembler();
    const outcomes = [chunk('a', 0, 2, 0), chunk('b', 0, 3, 1), chunk('b', 1, 3, 2), chunk('a', 1, 2, 3), chunk('b', 2, 3, 4)].map((c) => a.add(c, 0).outcome);
    expect(outcomes.map((o) => (o.kind === 'complete' ? o.pieces.join('') : o.kind))).toEqual(['waiting', 'waiting', 'waiting', 'a0a1', 'b0b1b2']);
  });

  it('refuses chunks that contradict themselves or their message, without disturbing it', () => {
    const a = assembler();
    expect(a.add(chunk('m', 3, 3, 0), 0).outcome).toMatchObject({ kind: 'invalid' });
    expect(a.add(chunk('m', 0, 0, 0), 0).outcome).toMatchObject({ kind: 'invalid' });
    expect(a.add(chunk('m', 0, 1e9, 0), 0).outcome).toMatchObject({ kind: 'invalid' });
    a.add(chunk('m', 0, 2, 1), 0);
    expect(a.add(chunk('m', 1, 5, 2), 0).outcome).toEqual({ kind: 'invalid', reason: 'chunk 1 of message m says 5 chunks, its earlier chunks 2' });
    expect(a.add(chunk('m', 1, 2, 3), 0).outcome.kind).toBe('complete');
  });

  it('gives a message up when no new chunk came for timeoutMs, and ignores its late chunks', () => {
    const a = assembler();
    a.add(chunk('m', 0, 3, 5), 0);
    a.add(chunk('m', 1, 3, 6), 600); // progress: the deadline moves to 1600
    expect(a.nextDeadline()).toBe(1_600);
    expect(a.add(chunk('m', 1, 3, 7), 900).outcome.kind).toBe('duplicate'); // no progress
    expect(a.expire(1_599)).toEqual([]);
    expect(a.expire(1_600)).toEqual([{ id: 'm', seen: 2, count: 3, firstOffset: 5, reason: 'timeout' }]);
    expect(a.nextDeadline()).toBeUndefined();
    expect(a.add(chunk('m', 2, 3, 8), 1_700)).toEqual({ outcome: { kind: 'finished' }, givenUp: [] });
  });

  it('a chunk that arrives after its message ran out of time finds it given up, on add as on expire', () => {
    const a = assembler();
    a.add(chunk('m', 0, 2, 0), 0);
    expect(a.add(chunk('m', 1, 2, 1), TIMEOUT)).toEqual({
      outcome: { kind: 'finished' },
      givenUp: [{ id: 'm', seen: 1, count: 2, firstOffset: 0, reason: 'timeout' }],
    });
  });

  it('gives up the oldest messages when the incomplete ones hold more than maxHeldBytes', () => {
    const a = assembler(45);
    a.add(chunk('old', 0, 3, 0), 0);
    a.add(chunk('old', 1, 3, 1), 0);
    a.add(chunk('mid', 0, 3, 2), 0);
    a.add(chunk('new', 0, 3, 3), 0);
    expect(a.heldBytes).toBe(40);
    const { givenUp } = a.add(chunk('new', 1, 3, 4), 0); // 50 > 45
    expect(givenUp).toEqual([{ id: 'old', seen: 2, count: 3, firstOffset: 0, reason: 'memory' }]);
    expect(a.heldBytes).toBe(30);
    expect(a.add(chunk('old', 2, 3, 5), 0).outcome.kind).toBe('finished');
  });

  it('commits may go up to the lowest offset of a chunk of an incomplete message', () => {
    const a = assembler();
    expect(a.commitLimit()).toBeUndefined();
    a.add(chunk('a', 1, 2, 7), 0); // arrived first, though not the first chunk
    a.add(chunk('b', 0, 2, 8), 0);
    a.add(chunk('a', 0, 2, 9), 0); // a's first chunk, delayed behind the others: completes a
    expect(a.commitLimit()).toBe(8);
    a.add(chunk('c', 1, 3, 10), 0);
    a.add(chunk('c', 0, 3, 6), 0); // an offset below what came before (a reader may see that)
    expect(a.commitLimit()).toBe(6);
    a.add(chunk('b', 1, 2, 11), 0);
    expect(a.commitLimit()).toBe(6);
    a.add(chunk('c', 2, 3, 12), 0);
    expect(a.commitLimit()).toBeUndefined();
  });

  it('forgets finished ids after rememberMs, and keeps at most rememberIds of them', () => {
    const a = new ChunkAssembler<string>({ timeoutMs: TIMEOUT, maxHeldBytes: 1_000, rememberMs: 5_000, rememberIds: 2 });
    for (const [i, id] of ['x', 'y', 'z'].entries()) a.add(chunk(id, 0, 1, i), 0);
    a.expire(0);
    expect(a.add(chunk('x', 0, 2, 10), 0).outcome.kind).toBe('waiting'); // x was the oldest of three: forgotten
    expect(a.add(chunk('z', 0, 1, 11), 4_999).outcome.kind).toBe('finished');
    expect(a.add(chunk('z', 0, 1, 12), 5_001).outcome.kind).toBe('complete'); // remembered 5 s only
  });

  it('property: any arrival order with duplicates delivers each message once, whole, and only when complete', () => {
    const messages = fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 5 });
    fc.assert(
      fc.property(
        messages.chain((counts) => {
          const all = counts.flatMap((count, m) => Array.from({ length: count }, (_, index) => ({ m, index, count })));
          return fc.tuple(fc.constant(counts), fc.shuffledSubarray([...all, ...all], { minLength: all.length * 2, maxLength: all.length * 2 }));
        }),
        ([counts, arrivals]) => {
          const a = assembler();
          const delivered: string[] = [];
          arrivals.forEach((c, offset) => {
            const { outcome } = a.add(chunk(`m${c.m}`, c.index, c.count, offset), 0);
            if (outcome.kind === 'complete') delivered.push(outcome.pieces.join('|'));
          });
          const expected = counts.map((count, m) => Array.from({ length: count }, (_, i) => `m${m}${i}`).join('|'));
          expect([...delivered].sort()).toEqual([...expected].sort());
          expect(a.assembling).toBe(0);
        },
      ),
    );
  });
});
