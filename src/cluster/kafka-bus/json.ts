// What the bus puts on a topic: JSON, refusing values that JSON would silently change or drop.
import { KafkaBusError } from './errors.js';

/** Encodes a value as JSON, refusing what JSON would silently change or drop. */
export function encodeJson(value: unknown): string {
  checkJson(value, '$', new Set());
  return JSON.stringify(value);
}

function checkJson(value: unknown, path: string, parents: Set<object>): void {
  const refuse = (what: string): never => {
    throw new KafkaBusError('NOT_JSON', `value is not JSON data: ${what} at ${path}`);
  };
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) refuse(String(value));
      return;
    case 'object': {
      if (value === null) return;
      if (parents.has(value)) refuse('a cycle');
      const proto: unknown = Object.getPrototypeOf(value);
      parents.add(value);
      if (Array.isArray(value)) {
        value.forEach((item, i) => checkJson(item, `${path}[${i}]`, parents));
      } else if (proto === Object.prototype || proto === null) {
        for (const [k, v] of Object.entries(value)) {
          // An undefined field is absent once encoded, which is what reading it gives anyway.
          if (v !== undefined) checkJson(v, `${path}.${k}`, parents);
        }
      } else {
        refuse(`a ${(value as { constructor?: { name?: string } }).constructor?.name ?? 'non-plain'} object`);
      }
      parents.delete(value);
      return;
    }
    default:
      refuse(typeof value === 'undefined' ? 'undefined' : `a ${typeof value}`);
  }
}
