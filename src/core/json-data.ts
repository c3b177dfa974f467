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
  // Most values are JSON data: a walk that keeps no path and no set of parents says so about
  // three times faster (a whole 65 536 × 3 map took the singleton ~90 ms to check per publish).
  // Only a value it cannot vouch for is walked again, to say what is wrong and where.
  if (isJsonData(value, 0)) return;
  walk(value, { path: [], parents: new Set(), copy: false, bytes: 0 });
}

/** Nesting past which `isJsonData` gives up (a cycle, or a value nested deeper than any of ours): the full walk decides. */
const QUICK_DEPTH = 64;

/** True only for JSON data nested at most `QUICK_DEPTH` deep; false says nothing (see `checkJsonData`). */
function isJsonData(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object': {
      if (value === null) return true;
      if (depth >= QUICK_DEPTH) return false;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) if (!isJsonData(value[i], depth + 1)) return false;
        return true;
      }
      const proto: unknown = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) return false;
      for (const k in value) {
        if (!Object.hasOwn(value, k)) return false;
        const v = (value as Record<string, unknown>)[k];
        if (v !== undefined && !isJsonData(v, depth + 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

/**
 * A deep copy of JSON data, frozen all through (undefined object fields left out, as JSON would);
 * throws `NotJsonError` for anything else. A value that is already deeply frozen is still copied:
 * freezing says nothing of what the value holds.
 */
export function frozenJsonCopy<T>(value: T): T {
  return walk(value, { path: [], parents: new Set(), copy: true, bytes: 0 }) as T;
}

/** A frozen copy, and an upper bound of the UTF-8 bytes of its JSON text (`JSON.stringify`). */
export interface MeasuredJsonCopy<T> {
  readonly value: T;
  /**
   * At least `Buffer.byteLength(JSON.stringify(value))`, often several times more: every string
   * counted as if each of its UTF-16 units needed a six-byte escape, every number as 25 bytes.
   */
  readonly maxBytes: number;
}

/**
 * `frozenJsonCopy` that also bounds the size of the value's JSON text, in the same walk. A bus
 * needs a value's encoded size to decide whether it fits in one record; most values are far below
 * the limit, and this bound proves it without encoding them (a `JSON.stringify` per produce is
 * what the embedded bus saves by keeping frozen copies). Only a value whose bound exceeds the
 * limit needs to be encoded and measured exactly.
 */
export function measuredJsonCopy<T>(value: T): MeasuredJsonCopy<T> {
  const state: WalkState = { path: [], parents: new Set(), copy: true, bytes: 0 };
  const copy = walk(value, state) as T;
  return { value: copy, maxBytes: state.bytes };
}

// The bound's parts. A string's JSON is at most 6 bytes per UTF-16 unit (`\u001f`, a lone
// surrogate's `\udc00`; any other unit is at most 3 UTF-8 bytes, a surrogate pair 4 for two units)
// plus its quotes. The longest number JSON writes is 25 characters (`-0.0000033333333333333337`,
// 17 digits behind five zeros; `-1.7976931348623157e+308`, -Number.MAX_VALUE, is 24).
const STRING_BYTES_PER_UNIT = 6;
const QUOTES = 2;
const NUMBER_BYTES = 25;
/** `false`, the longer literal. */
const BOOLEAN_BYTES = 5;
const NULL_BYTES = 4;
/** Brackets or braces. */
const BRACKETS = 2;
/** A comma after each item (one too many, which a bound may count), and a colon after a key. */
const SEPARATOR = 1;

interface WalkState {
  readonly path: (string | number)[];
  readonly parents: Set<object>;
  readonly copy: boolean;
  /** The bound of the JSON bytes walked so far. */
  bytes: number;
}

function walk(value: unknown, s: WalkState): unknown {
  switch (typeof value) {
    case 'string':
      s.bytes += value.length * STRING_BYTES_PER_UNIT + QUOTES;
      return value;
    case 'boolean':
      s.bytes += BOOLEAN_BYTES;
      return value;
    case 'number':
      if (!Number.isFinite(value)) refuse(String(value), s.path);
      s.bytes += NUMBER_BYTES;
      return value;
    case 'object': {
      if (value === null) {
        s.bytes += NULL_BYTES;
        return null;
      }
      const { path, parents, copy } = s;
      if (parents.has(value)) refuse('a cycle', path);
      parents.add(value);
      s.bytes += BRACKETS;
      let result: unknown = value;
      if (Array.isArray(value)) {
        const items: unknown[] = copy ? new Array<unknown>(value.length) : [];
        s.bytes += value.length * SEPARATOR;
        for (let i = 0; i < value.length; i++) {
          path.push(i);
          const item = walk(value[i], s);
          path.pop();
          if (copy) items[i] = item;
        }
        if (copy) result = Object.freeze(items);
      } else {
        const proto: unknown = Object.getPrototypeOf(value);
        if (proto !== Object.prototype && proto !== null)
          refuse(`a ${(value as { constructor?: { name?: string } }).constructor?.name ?? 'non-plain'} object`, path);
        const fields: Record<string, unknown> = {};
        for (const k in value) {
          const v = (value as Record<string, unknown>)[k];
          if (v === undefined || !Object.hasOwn(value, k)) continue;
          s.bytes += k.length * STRING_BYTES_PER_UNIT + QUOTES + 2 * SEPARATOR;
          path.push(k);
          const field = walk(v, s);
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
      return refuse(typeof value === 'undefined' ? 'undefined' : `a ${typeof value}`, s.path);
  }
}

function refuse(what: string, path: readonly (string | number)[]): never {
  const where = path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`)).join('');
  throw new NotJsonError(`value is not JSON data: ${what} at $${where}`);
}
