// Ports that count their failures in the node's telemetry, so an operator sees a flaky broker or
// database in the metrics before it shows in the shard map.
import type { Bus } from '../cluster/bus.js';
import type { MetaStore } from '../store/meta-store.js';
import type { Telemetry } from './telemetry.js';

export function countedBus(bus: Bus, telemetry: Telemetry): Bus {
  return {
    produce: (topic, value, options) =>
      bus.produce(topic, value, options).catch((e: unknown) => {
        telemetry.busError('produce');
        throw e;
      }),
    subscribe: (topic, group, handler, options) =>
      bus.subscribe(topic, group, handler, {
        ...options,
        onError: (e, record) => {
          telemetry.busError('handle');
          options?.onError?.(e, record);
        },
      }),
    committedOffset: (topic, group) => bus.committedOffset(topic, group),
  };
}

/** Every MetaStore call that rejects is counted under its method name (retried or not). */
export function countedMetaStore(store: MetaStore, telemetry: Telemetry): MetaStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const result = (value as (...a: unknown[]) => unknown).apply(target, args);
        if (!(result instanceof Promise)) return result;
        return result.catch((e: unknown) => {
          telemetry.metaStoreError(String(prop));
          throw e;
        });
      };
    },
  });
}
