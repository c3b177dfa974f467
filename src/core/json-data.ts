// What may travel on a bus or sit in a MetaStore: JSON data (strings, finite numbers, booleans,
// null, arrays and plain objects). One walk both checks a value and, when asked, copies and
// freezes it: the embedded bus and the in-memory MetaStore keep frozen copies and share them with
// every reader, which costs one copy per write instead of a `structuredClone` per write and read
// (the simulator's hottest path).

/** A value that JSON would silently change or drop; `message` says what and where (`$.a[2]`). */
export class NotJsonError extends TypeError {
  override readonly name = 'NotJsonError';
}

/** Throws `NotJsonError` unless `value` is JSON data. An undefined object field is allowed: it is absent once encoded. */
export function checkJsonData(value: unknown): void {
  walk(value, [], new Set(), false);
}

/**
 * A deep copy of JSON data, frozen all through (undefined object fields left out, as JSON would);
 * throws `NotJsonError` for anything else. A value that is already deeply frozen is still copied:
 * freezing says nothing of what the value holds.
 */
export function frozenJsonCopy<T>(value: T): T {
  return walk(value, [], new Set(), true) as T;
}

function walk(value: unknown, path: (string | number)[], parents: Set<object>, copy: boolean): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (!Number.isFinite(value)) refuse(String(value), path);
      return value;
    case 'object': {
      if (value === null) return null;
      if (parents.has(value)) refuse('a cycle', path);
      parents.add(value);
      let result: unknown = value;
      if (Array.isArray(value)) {
        const items: unknown[] = copy ? new Array<unknown>(value.length) : [];
        for (let i = 0; i < value.length; i++) {
          path.push(i);
          const item = walk(value[i], path, parents, copy);
          path.pop();
          if (copy) items[i] = item;
        }
        if (copy) result = Object.freeze(items);
      } else {
        const proto: unknown = Object.getPrototypeOf(value);
        if (proto !== Object.prototype && proto !== null) refuse(`a ${(value as { constructor?: { name?: string } }).constructor?.name ?? 'non-plain'} object`, path);
        const fields: Record<string, unknown> = {};
        for (const k in value) {
          const v = (value as Record<string, unknown>)[k];
          if (v === undefined || !Object.hasOwn(value, k)) continue;
          path.push(k);
          const field = walk(v, path, parents, copy);
          path.pop();
          if (!copy) continue;
          // `__proto__` as a plain assignment would set the prototype; JSON.parse makes it a field.
          if (k === '__proto__') Object.defineProperty(fields, k, { value: field, enumerable: true, writable: true, configurable: true });
          else fields[k] = field;
        }
        if (copy) result = Object.freeze(fields);
      }
      parents.delete(value);
      return result;
    }
    default:
      return refuse(typeof value === 'undefined' ? 'undefined' : `a ${typeof value}`, path);
  }
}

function refuse(what: string, path: readonly (string | number)[]): never {
  const where = path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`)).join('');
  throw new NotJsonError(`value is not JSON data: ${what} at $${where}`);
}
