// npm run kafka -- <tool> [args]: Kafka's own command-line clients from the fetched jars, without a
// Kafka distribution: `topics` (kafka-topics), `consumer-groups` (kafka-consumer-groups),
// `console-consumer`, `console-producer`, `configs`. Without --bootstrap-server it talks to
// $SHARDHERD_KAFKA_BROKERS, else to the broker of `npm run services:start`.
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENV_KAFKA_BROKERS, artifactsDir, javaBinary, kafkaArtifacts, kafkaVersion, libDir } from './config.js';
import { kafkaToolsLogging } from './kafka-logging.js';
import { readRunning } from './services.js';

export const KAFKA_TOOLS: Readonly<Record<string, string>> = {
  topics: 'org.apache.kafka.tools.TopicCommand',
  'consumer-groups': 'org.apache.kafka.tools.consumer.group.ConsumerGroupCommand',
  'console-consumer': 'org.apache.kafka.tools.consumer.ConsoleConsumer',
  'console-producer': 'org.apache.kafka.tools.ConsoleProducer',
  configs: 'org.apache.kafka.admin.ConfigCommand',
};

function usage(): number {
  process.stderr.write(
    `usage: npm run kafka -- <${Object.keys(KAFKA_TOOLS).join('|')}> [arguments of the Kafka tool]\n` +
      'e.g.   npm run kafka -- consumer-groups --describe --group <cluster>.offsets.<dataset>\n',
  );
  return 2;
}

async function main(argv: string[]): Promise<number> {
  const [tool, ...args] = argv;
  const mainClass = tool === undefined ? undefined : KAFKA_TOOLS[tool];
  if (mainClass === undefined) return usage();
  const dev = (await readRunning('dev'))?.kafka;
  // The tools of the release the dev broker runs, else of the chosen one (they speak to either).
  const version = dev?.version ?? kafkaVersion();
  const artifacts = kafkaArtifacts(version);
  const lib = libDir(artifacts);
  if (!existsSync(lib)) {
    process.stderr.write(`no Kafka jars in ${lib}: run npm run services:fetch first\n`);
    return 1;
  }
  if (!args.includes('--bootstrap-server')) {
    const brokers = process.env[ENV_KAFKA_BROKERS] || dev?.brokers.join(',');
    if (!brokers) {
      process.stderr.write(`no broker: pass --bootstrap-server, set ${ENV_KAFKA_BROKERS}, or npm run services:start\n`);
      return 1;
    }
    args.unshift('--bootstrap-server', brokers);
  }
  // Warnings and errors to stderr, so the tools' output stays parseable.
  const logging = kafkaToolsLogging(version, artifactsDir(artifacts));
  writeFileSync(logging.file, logging.text);
  const result = spawnSync(javaBinary(), [logging.jvmOption, '-cp', join(lib, '*'), mainClass, ...args], { stdio: 'inherit' });
  if (result.error) {
    process.stderr.write(`could not run ${javaBinary()}: ${result.error.message} (is Java 17 installed?)\n`);
    return 1;
  }
  return result.status ?? 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  },
);
