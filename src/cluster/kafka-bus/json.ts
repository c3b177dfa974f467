// What the bus puts on a topic: JSON, refusing values that JSON would silently change or drop.
import { checkJsonData, NotJsonError } from '../../core/json-data.js';
import { KafkaBusError } from './errors.js';

/** Encodes a value as JSON, refusing what JSON would silently change or drop (`NOT_JSON`). */
export function encodeJson(value: unknown): string {
  try {
    checkJsonData(value);
  } catch (e) {
    if (e instanceof NotJsonError) throw new KafkaBusError('NOT_JSON', e.message);
    throw e;
  }
  return JSON.stringify(value);
}
