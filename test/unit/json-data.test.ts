// The check and frozen copy behind the embedded bus, the in-memory MetaStore and the Kafka bus's
// encoder: what JSON would change or drop is refused with its path; a copy is deep and frozen.
import { describe, expect, it } from 'vitest';
import { checkJsonData, frozenJsonCopy, NotJsonError } from '../../src/core/json-data.js';

describe('checkJsonData', () => {
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
