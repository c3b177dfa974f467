// Every report window, this node's load figures for each dataset placed by load go to the
// singleton's inbox: one record per dataset (never one per copy), never acknowledged. A record lost
// on the way only leaves the singleton's figures a window older (they go stale after `staleMs`).
import type { Cancel } from '../cluster/clock.js';
import type { DatasetConfig } from '../core/dataset-config.js';
import type { DatasetRef } from '../core/ids.js';
import { WIRE_FORMAT, type InboxMessage } from '../protocol/wire.js';
import type { NodeEnv } from './node-env.js';

/** Starts the reports; returns what stops them. Nothing runs without a load meter. */
export function startLoadReports(
  env: Pick<NodeEnv, 'node' | 'incarnation' | 'clock' | 'settings' | 'log' | 'loadMeter'>,
  configs: () => ReadonlyMap<DatasetRef, DatasetConfig>,
  toInbox: (m: InboxMessage) => Promise<unknown>,
): Cancel {
  const meter = env.loadMeter;
  if (meter === undefined) return () => {};
  let cancel: Cancel;
  const report = () => {
    const at = env.clock.now();
    const { windowMs, datasets } = meter.takeWindow(at);
    for (const [dataset, figures] of datasets) {
      if (configs().get(dataset)?.loadBalance === undefined) continue;
      const message: InboxMessage = {
        format: WIRE_FORMAT,
        kind: 'loads',
        report: { node: env.node, incarnation: env.incarnation, dataset, at, windowMs, ...figures },
      };
      toInbox(message).catch((e: unknown) => env.log.debug({ err: e, dataset }, 'a load report was not sent; the next window sends newer figures'));
    }
    cancel = env.clock.schedule(env.settings.loadReportIntervalMs, report);
  };
  cancel = env.clock.schedule(env.settings.loadReportIntervalMs, report);
  return () => cancel();
}
