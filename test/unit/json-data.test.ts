// The check and frozen copy behind the embedded bus, the in-memory MetaStore and the Kafka bus's
// encoder: what JSON would change or drop is refused with its path; a copy is deep and frozen.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkJsonData, frozenJsonCopy, measuredJsonCopy, NotJsonError } from '../../src/core/json-data.js';

describe('checkJsonData', () => {
  it('accepts and refuses exactly what the full walk does, with the same message, on random values (its quick pass vouches only for JSON data)', () => {
    const outcome = (f: () => unknown) => {
      try {
        f();
        return 'ok';
      } catch (e) {
        return e instanceof NotJsonError ? e.message : `other: ${String(e)}`;
      }
    };
    fc.assert(
      fc.property(
        fc.oneof(
          fc.anything({ withNullPrototype: true, withBigInt: true, withDate: true, withMap: true, withSparseArray: true, withUnicodeString: true }),
          fc.jsonValue(),
        ),
        (value) => {
          expect(outcome(() => checkJsonData(value))).toBe(outcome(() => frozenJsonCopy(value)));
        },
      ),
      { numRuns: 5000 },
    );
    // Deeper than the quick pass goes: decided by the full walk.
    let deep: unknown = 1;
    for (let i = 0; i < 100; i++) deep = [deep];
    expect(() => checkJsonData(deep)).not.toThrow();
    const cyclic: unknown[] = [];
    let tip = cyclic;
    for (let i = 0; i < 70; i++) {
      const next: unknown[] = [];
      tip.push(next);
      tip = next;
    }
    tip.push(cyclic);
    expect(() => checkJsonData(cyclic)).toThrow(/a cycle at \$(\[0\]){71}$/);
  });

  it('accepts JSON data, with undefined object fields (absent once encoded)', () => {
    expect(() => checkJsonData({ a: [1, 'two', true, null, { b: -0.5 }], c: undefined })).not.toThrow();
  });

  it.each([
    [{ n: Number.POSITIVE_INFINITY }, 'Infinity at $.n'],
    [[1, [2, Number.NaN]], 'NaN at $[1][1]'],
    [{ list: [undefined] }, 'undefined at $.list[0]'],
    [{ f: () => 1 }, 'a function at $.f'],
    [{ big: 1n }, 'a bigint at $.big'],
    [{ at: new Date(0) }, 'a Date object at $.at'],
    [{ m: new Map() }, 'a Map object at $.m'],
    [undefined, 'undefined at $'],
  ])('refuses %o: %s', (value, where) => {
    expect(() => checkJsonData(value)).toThrow(NotJsonError);
    expect(() => checkJsonData(value)).toThrow(`value is not JSON data: ${where}`);
  });

  it('refuses a cycle but not the same object twice side by side', () => {
    const shared = { x: 1 };
    expect(() => checkJsonData({ a: shared, b: [shared, shared] })).not.toThrow();
    const cyclic: Record<string, unknown> = { a: { b: {} } };
    (cyclic.a as { b: Record<string, unknown> }).b.back = cyclic;
    expect(() => checkJsonData(cyclic)).toThrow('value is not JSON data: a cycle at $.a.b.back');
  });
});

describe('frozenJsonCopy', () => {
  it('is a deep copy equal to what JSON gives back, frozen all through', () => {
    const value = { a: [1, { b: 'c' }], d: null, e: undefined };
    const copy = frozenJsonCopy(value);
    expect(copy).toEqual(JSON.parse(JSON.stringify(value)));
    expect('e' in copy).toBe(false);
    expect(Object.isFrozen(copy) && Object.isFrozen(copy.a) && Object.isFrozen(copy.a[1])).toBe(true);
    expect(() => (copy.a as unknown[]).push(2)).toThrow(TypeError);
  });

  it('does not share anything with the original, frozen or not', () => {
    const inner = Object.freeze({ n: 1 });
    const value: { inner: { n: number }; list: { n: number }[] } = { inner, list: [inner] };
    const copy = frozenJsonCopy(value);
    expect(copy.inner).not.toBe(inner);
    value.list.push({ n: 2 });
    expect(copy.list).toEqual([{ n: 1 }]);
  });

  it('keeps a __proto__ key as a field, as JSON.parse does, without changing the prototype', () => {
    const parsed = JSON.parse('{"__proto__": {"polluted": true}}') as Record<string, unknown>;
    const copy = frozenJsonCopy(parsed);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.hasOwn(copy, '__proto__')).toBe(true);
    expect((copy as { polluted?: boolean }).polluted).toBeUndefined();
    expect(JSON.stringify(copy)).toBe('{"__proto__":{"polluted":true}}');
  });

  it('refuses what checkJsonData refuses, with the same message', () => {
    expect(() => frozenJsonCopy({ a: [Symbol('s')] })).toThrow('value is not JSON data: a symbol at $.a[0]');
  });
});

describe('measuredJsonCopy', () => {
  const bytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value));

  it('is the frozen copy, with a bound of its JSON bytes', () => {
    const value = { a: [1, 'two', true, null, { b: -0.5 }], c: undefined };
    const { value: copy, maxBytes } = measuredJsonCopy(value);
    expect(copy).toEqual(frozenJsonCopy(value));
    expect(Object.isFrozen(copy.a)).toBe(true);
    expect(maxBytes).toBeGreaterThanOrEqual(bytes(value));
  });

  it.each([
    ['the longest number', -0.0000033333333333333337],
    ['the largest number', -Number.MAX_VALUE],
    ['escaped control characters', '\u0000\u001f"\\'],
    ['lone surrogates', '\ud800\udfff'.split('').reverse().join('')],
    ['emoji and accents', '😀é€'],
    ['an empty array and object', { a: [], o: {} }],
    ['false', false],
    ['false and null in an array', [false, null]],
    ['a key that needs escapes', { '\n"é': 1 }],
  ])('never says less than the real size: %s', (_what, value) => {
    expect(measuredJsonCopy(value).maxBytes).toBeGreaterThanOrEqual(bytes(value));
  });

  it('property: the bound is at least the JSON bytes of any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue({ depthSize: 'medium' }), fc.string({ unit: 'binary' }), (value, text) => {
        const data = { value, text, lone: text.length > 0 ? text.slice(0, 1) + '\udc00' : '' };
        expect(measuredJsonCopy(data).maxBytes).toBeGreaterThanOrEqual(bytes(data));
      }),
      { numRuns: 300 },
    );
  });

  it('is a few times the JSON size for plain ASCII data, so only values near a limit need encoding', () => {
    const value = { shards: Array.from({ length: 100 }, (_, i) => ({ node: `node-${i}`, status: 'Active', n: i })) };
    const { maxBytes } = measuredJsonCopy(value);
    expect(maxBytes).toBeLessThan(6 * bytes(value));
  });
});
