// The services scripts run the Kafka release SHARDHERD_KAFKA_VERSION names (the compatibility lane
// sets 3.9.2), each with the slf4j binding its distribution ships; a typo is refused, not a silent default.
import { describe, expect, it } from 'vitest';
import { ENV_KAFKA_VERSION, KAFKA_COMPAT_VERSION, KAFKA_VERSION, kafkaArtifacts, kafkaVersion } from '../../scripts/services/config.js';

describe('the Kafka release of the services scripts', () => {
  it('is the default unless SHARDHERD_KAFKA_VERSION names another the scripts run', () => {
    expect(kafkaVersion({})).toBe(KAFKA_VERSION);
    expect(kafkaVersion({ [ENV_KAFKA_VERSION]: ' ' })).toBe(KAFKA_VERSION);
    expect(kafkaVersion({ [ENV_KAFKA_VERSION]: KAFKA_COMPAT_VERSION })).toBe(KAFKA_COMPAT_VERSION);
    expect(() => kafkaVersion({ [ENV_KAFKA_VERSION]: '3.9' })).toThrow(`${ENV_KAFKA_VERSION}=3.9 is not a Kafka the services scripts run: use one of`);
  });

  it('fetches each release into its own folder with the slf4j binding its distribution ships', () => {
    const newest = kafkaArtifacts(KAFKA_VERSION);
    const compat = kafkaArtifacts(KAFKA_COMPAT_VERSION);
    expect(newest.dirName).toBe(`kafka-${KAFKA_VERSION}`);
    expect(compat.dirName).toBe(`kafka-${KAFKA_COMPAT_VERSION}`);
    expect(newest.dependencies.map((d) => d.artifactId)).toEqual(['kafka_2.13', 'kafka-tools', 'log4j-slf4j-impl']);
    expect(compat.dependencies.map((d) => d.artifactId)).toEqual(['kafka_2.13', 'kafka-tools', 'slf4j-reload4j', 'reload4j']);
    expect(newest.dependencies.filter((d) => d.groupId === 'org.apache.kafka').every((d) => d.version === KAFKA_VERSION)).toBe(true);
  });
});
