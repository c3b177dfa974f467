// What the chaos test files share: the node processes' settings (short sessions and intervals, so
// faults show within seconds) and the hooks that stop everything at the end, keeping the nodes'
// configs, logs and sinks when a test failed.
import { rm } from 'node:fs/promises';
import type { Kafka, Producer } from 'kafkajs';
import { afterAll, afterEach } from 'vitest';
import { createTopicsWithLeaders } from '../../src/cluster/kafka-client.js';
import type { NumberedProducer } from './numbered-producer.js';
import { ProcessCluster, type ProcessClusterOptions } from './process-cluster.js';

export const CHAOS_SESSION_TIMEOUT_MS = 3_000;

/** Runtime settings of the chaos tests' nodes: fast publishing, resends and retries, no cooldown. */
export const CHAOS_RUNTIME = {
  publishIntervalMs: 1_000,
  reportResendMs: 500,
  recoveryReplyTimeoutMs: 2_000,
  pollIntervalMs: 50,
  reassignmentCooldownMs: 0,
  retryInitialMs: 200,
  retryMaxMs: 2_000,
} as const;

/** Creates the topics, `partitions` partitions of `replicationFactor` copies each, and waits for their leaders. */
export async function createTopics(kafka: Kafka, topics: readonly string[], partitions: number, replicationFactor = 1): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await createTopicsWithLeaders(
      admin,
      topics.map((topic) => ({ topic, numPartitions: partitions, replicationFactor })),
    );
  } finally {
    await admin.disconnect();
  }
}

/** A cluster of node processes with the chaos settings: short sessions, fast heartbeats and `CHAOS_RUNTIME`. */
export function chaosCluster(options: Omit<ProcessClusterOptions, 'sessionTimeoutMs' | 'heartbeatIntervalMs' | 'runtime'>): ProcessCluster {
  return new ProcessCluster({ ...options, sessionTimeoutMs: CHAOS_SESSION_TIMEOUT_MS, heartbeatIntervalMs: 500, runtime: CHAOS_RUNTIME });
}

/** What a chaos test file started, as far as it got (anything may be undefined after a failed setup). */
export interface ChaosParts {
  readonly numbered?: NumberedProducer;
  readonly producer?: Producer;
  readonly cluster?: ProcessCluster;
  readonly dir?: string;
  /** Stops what else the file started (a broker or a database of its own). */
  readonly stopServices?: () => Promise<void>;
}

/** Registers the file's teardown: stop the producer, the nodes and the services; keep the folder if a test failed. */
export function chaosTeardown(label: string, parts: () => ChaosParts): void {
  let failed = false;
  afterEach((ctx) => {
    if (ctx.task.result?.state === 'fail') failed = true;
  });
  afterAll(async () => {
    const p = parts();
    await p.numbered?.stop().catch(() => undefined);
    await p.producer?.disconnect().catch(() => undefined);
    await p.cluster?.stopAll();
    await p.stopServices?.();
    // The nodes' logs explain a failure: keep them, and say where.
    if (failed && p.dir) process.stderr.write(`[${label}] node configs, logs and sinks kept in ${p.dir}\n`);
    else if (p.dir) await rm(p.dir, { recursive: true, force: true });
  }, 120_000);
}
