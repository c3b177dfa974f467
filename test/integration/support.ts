import { inject } from 'vitest';
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
