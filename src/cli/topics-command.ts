// `shardherd topics create --config <file> [--dataset <ref>...]`: the Kafka topics a cluster needs
// before its nodes start (`createClusterTopics`), one line per topic. Exit codes: 0 every topic
// exists as it should, 1 Kafka failed or a topic is not as it should be (another partition count:
// never changed), 2 a bad config or a --dataset the config does not set up.
import { pino } from 'pino';
import { loadNodeConfig, NodeConfigError } from '../node/node-config.js';
import { createClusterTopics } from '../node/cluster-topics.js';
import { table } from './admin/table.js';
import type { LogLevel } from './options.js';
import { timestampWithIso } from './log-timestamp.js';

export interface TopicsIo {
  readonly stdout: (s: string) => void;
  readonly stderr: (s: string) => void;
}

const NAME = 'shardherd topics create';

export async function runTopicsCreate(configPath: string, datasets: readonly string[] | undefined, logLevel: LogLevel, io: TopicsIo): Promise<number> {
  // Logs on stderr: stdout is the list of topics, for people and scripts.
  const log = pino({ level: logLevel, base: null, timestamp: timestampWithIso }, pino.destination({ dest: 2, sync: true }));
  try {
    const config = await loadNodeConfig(configPath);
    const topics = await createClusterTopics(config, { ...(datasets === undefined ? {} : { datasets }), log, configSource: configPath });
    io.stdout(
      table(
        ['TOPIC', 'PARTITIONS', 'DATASET', 'RESULT'],
        topics.map((t) => [t.topic, String(t.partitions), t.dataset ?? '-', t.outcome === 'created' ? 'created' : 'exists']),
      ),
    );
    return 0;
  } catch (e) {
    io.stderr(`${NAME}: ${e instanceof Error ? e.message : String(e)}\n`);
    return e instanceof NodeConfigError ? 2 : 1;
  }
}
