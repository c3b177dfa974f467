// The start the embedded tests share: nodes started on the cluster's simulated clock, a dataset
// set up (asserted verified), then `ingestMs` of simulated time for it to be placed and ingest.
import { expect } from 'vitest';
import type { DatasetConfigInput } from '../../src/core/dataset-config.js';
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { SimDriver } from '../../src/sim/driver.js';

export async function startWithDataset(cluster: EmbeddedCluster, dataset: DatasetConfigInput, ingestMs: number): Promise<SimDriver> {
  const driver = new SimDriver(cluster);
  await cluster.startNodes();
  await driver.advance(500);
  const reply = cluster.setupDataset(dataset, 5_000);
  await driver.advance(100);
  expect((await reply).type).toBe('DatasetVerified');
  await driver.advance(ingestMs);
  return driver;
}
