// How a Kafka JVM of the services scripts logs: the broker at INFO to its log file (stdout), the
// command-line tools at WARN to stderr (so their output stays parseable). Kafka 3.x reads a log4j
// 1.2 properties file (through reload4j), 4.x a log4j 2 one: same levels, each in its own format.
import { join } from 'node:path';
import { kafkaLogsWithLog4j2 } from './config.js';

export interface KafkaLogging {
  /** Where the file is written. */
  readonly file: string;
  readonly text: string;
  /** The JVM option that points the release's logging at `file`. */
  readonly jvmOption: string;
}

/** Loggers a broker keeps at WARN: per-request and per-config lines that would flood the test log. */
const QUIET_BROKER_LOGGERS = ['kafka.request.logger', 'state.change.logger', 'org.apache.kafka.common.config', 'kafka.server.KafkaConfig'];

const PATTERN = '[%d] %p %m (%c)%n';
const TOOLS_PATTERN = '[%p] %m (%c)%n';

export function kafkaBrokerLogging(version: string, dir: string): KafkaLogging {
  return logging(version, dir, 'broker', 'INFO', 'stdout', PATTERN, QUIET_BROKER_LOGGERS);
}

export function kafkaToolsLogging(version: string, dir: string): KafkaLogging {
  return logging(version, dir, 'tools', 'WARN', 'stderr', TOOLS_PATTERN, []);
}

function logging(
  version: string,
  dir: string,
  what: string,
  level: 'INFO' | 'WARN',
  target: 'stdout' | 'stderr',
  pattern: string,
  quiet: readonly string[],
): KafkaLogging {
  if (kafkaLogsWithLog4j2(version)) {
    const file = join(dir, `${what}-log4j2.properties`);
    const text = [
      'status = warn',
      'appender.out.type = Console',
      'appender.out.name = OUT',
      `appender.out.target = ${target === 'stdout' ? 'SYSTEM_OUT' : 'SYSTEM_ERR'}`,
      'appender.out.layout.type = PatternLayout',
      `appender.out.layout.pattern = ${pattern}`,
      `rootLogger.level = ${level}`,
      'rootLogger.appenderRef.out.ref = OUT',
      ...quiet.flatMap((name, i) => [`logger.quiet${i}.name = ${name}`, `logger.quiet${i}.level = WARN`]),
    ];
    return { file, text: `${text.join('\n')}\n`, jvmOption: `-Dlog4j2.configurationFile=${file}` };
  }
  const file = join(dir, `${what}-log4j.properties`);
  const text = [
    `log4j.rootLogger=${level}, out`,
    'log4j.appender.out=org.apache.log4j.ConsoleAppender',
    `log4j.appender.out.Target=System.${target === 'stdout' ? 'out' : 'err'}`,
    'log4j.appender.out.layout=org.apache.log4j.PatternLayout',
    `log4j.appender.out.layout.ConversionPattern=${pattern}`,
    ...quiet.map((name) => `log4j.logger.${name}=WARN`),
  ];
  return { file, text: `${text.join('\n')}\n`, jvmOption: `-Dlog4j.configuration=file:${file}` };
}
