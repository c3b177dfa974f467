// npm run services:fetch | services:start | services:stop | services:status
//
// `fetch` fetches the Cassandra jars and those of every Kafka release the tests run (the default
// and the compatibility lane's) and installs Schemathesis (the integration tests' OpenAPI checker)
// into a Python venv, all in the cache.
//
// `start` runs the "dev" instance for development: the JVMs outlive the command and run until
// `services:stop`. It prints shell exports on stdout, so `eval "$(npm run -s services:start)"`
// points `npm test` (and anything else) at them; everything else goes to stderr. A `start` while
// the instance runs keeps it (its ports, topics and tables) and prints its exports again;
// `start --restart` replaces it with a fresh pair.
import { skipKafkajsNegativeTimeouts } from '../../src/cli/process-warnings.js';
import { ENV_CASSANDRA_CONTACT_POINTS, ENV_KAFKA_BROKERS, KAFKA_VERSIONS, cacheRoot, kafkaVersion } from './config.js';
import { fetchAll } from './fetch.js';
import { fetchSchemathesis } from './schemathesis.js';
import { readRunning, startServices, stopInstance } from './services.js';

const DEV_INSTANCE = 'dev';

// The readiness checks connect with kafkajs, whose negative timer Node 24 reports per connection.
skipKafkajsNegativeTimeouts();

function say(line: string): void {
  process.stderr.write(`${line}\n`);
}

const USAGE = 'usage: tsx scripts/services/cli.ts fetch | start [--restart] | stop | status';
const FLAGS: Record<string, readonly string[]> = { start: ['--restart'] };

async function main(command: string | undefined, flags: readonly string[]): Promise<number> {
  const unknown = flags.filter((f) => !(FLAGS[command ?? ''] ?? []).includes(f));
  if (unknown.length > 0) {
    say(`unknown option ${unknown.join(' ')} for ${String(command)}; ${USAGE}`);
    return 2;
  }
  switch (command) {
    case 'fetch': {
      const t = Date.now();
      const results = await fetchAll(say, cacheRoot(), KAFKA_VERSIONS);
      for (const r of results) say(`${r.name}: ${r.jars} jars in ${r.lib}${r.downloaded ? '' : ' (cached)'}`);
      // The integration tests' OpenAPI checker (test/integration/schemathesis.test.ts), in a Python venv.
      const st = await fetchSchemathesis(say);
      say(`schemathesis: ${st.version} in ${st.venv}${st.downloaded ? '' : ' (cached)'}`);
      say(`fetch done in ${((Date.now() - t) / 1000).toFixed(1)} s`);
      return 0;
    }
    case 'start': {
      const current = flags.includes('--restart') ? undefined : await readRunning(DEV_INSTANCE);
      if (current !== undefined) {
        say(
          `already running: Kafka PID ${String(current.kafka?.pid)}, Cassandra PID ${String(current.cassandra?.pid)}; kept (npm run services:start -- --restart for a fresh pair)`,
        );
        printExports(current.kafka?.brokers ?? [], current.cassandra?.contactPoints ?? []);
        return 0;
      }
      say(`starting Kafka ${kafkaVersion()} and Cassandra (instance "${DEV_INSTANCE}", cache ${cacheRoot()}) ...`);
      const running = await startServices({ instance: DEV_INSTANCE, owned: false, log: say });
      say(`ready in ${(running.startMs / 1000).toFixed(1)} s; logs and PID files in ${running.dir}`);
      say(`Kafka PID ${String(running.kafka?.pid)}, Cassandra PID ${String(running.cassandra?.pid)}; stop with npm run services:stop`);
      printExports(running.kafka?.brokers ?? [], running.cassandra?.contactPoints ?? []);
      return 0;
    }
    case 'stop': {
      await stopInstance(DEV_INSTANCE, say);
      say('stopped');
      return 0;
    }
    case 'status': {
      const running = await readRunning(DEV_INSTANCE);
      if (running === undefined) {
        say('not running (npm run services:start)');
        return 1;
      }
      say(`running: Kafka PID ${String(running.kafka?.pid)}, Cassandra PID ${String(running.cassandra?.pid)}`);
      printExports(running.kafka?.brokers ?? [], running.cassandra?.contactPoints ?? []);
      return 0;
    }
    default:
      say(USAGE);
      return 2;
  }
}

function printExports(brokers: string[], contactPoints: string[]): void {
  process.stdout.write(`export ${ENV_KAFKA_BROKERS}=${brokers.join(',')}\n`);
  process.stdout.write(`export ${ENV_CASSANDRA_CONTACT_POINTS}=${contactPoints.join(',')}\n`);
}

main(process.argv[2], process.argv.slice(3)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    say(err instanceof Error ? err.message : String(err));
    process.exit(1);
  },
);
