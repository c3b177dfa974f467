import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inject } from 'vitest';
import type { ProcessClusterOptions } from '../support/process-cluster.js';
import type { ProvidedServices } from './global-setup.js';

export type Services = Extract<ProvidedServices, { ok: true }>;

/**
 * The Kafka and Cassandra the global setup provides. Call it inside each test: when the services
 * could not be started it throws, so every integration test fails with the reason (never skips).
 */
export function services(): Services {
  const provided = inject('services');
  if (provided === undefined) {
    throw new Error('no services were provided: run the integration tests through vitest with test/integration/global-setup.ts');
  }
  if (!provided.ok) throw new Error(`Kafka and Cassandra are not available for the integration tests:\n${provided.error}`);
  return provided;
}

/** A name no other run or test uses (topics, groups, row keys). */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/** What every cluster of node processes in these tests starts from. */
export interface ProcessClusterBase {
  readonly services: Services;
  /** The nodes' configs, logs and sinks (kept when a test failed). */
  readonly dir: string;
  /** The cluster's name, unique to this run; its topics are named after it. */
  readonly name: string;
  /** ProcessCluster's options for that folder, name and keyspace on the shared Kafka and Cassandra. */
  readonly options: Pick<ProcessClusterOptions, 'dir' | 'cluster' | 'kafkaBrokers' | 'cassandraContactPoints' | 'cassandraLocalDataCenter' | 'keyspace'>;
}

/** A new folder and cluster name for a test file's node processes (`label` names both), on the shared services. */
export async function processClusterBase(label: string, keyspace = 'shardherd_test'): Promise<ProcessClusterBase> {
  const s = services();
  const dir = await mkdtemp(join(tmpdir(), `shardherd-${label}-`));
  const name = uniqueName(label).replace(/-/g, '_');
  const options = {
    dir,
    cluster: name,
    kafkaBrokers: s.kafkaBrokers,
    cassandraContactPoints: s.cassandraContactPoints,
    cassandraLocalDataCenter: s.cassandraLocalDataCenter,
    keyspace,
    // The package as users run it, built once for the run (./build-once.ts): each node process
    // then starts in about a third of the CPU it took through tsx.
    built: true,
  };
  return { services: s, dir, name, options };
}
