// npm run test:kafka-compat: the Kafka suites (vitest's `kafka-compat` project) on the
// compatibility lane's Kafka, which the integration setup starts from the services cache like the
// default one. Services pointed at by SHARDHERD_KAFKA_BROKERS / SHARDHERD_CASSANDRA_CONTACT_POINTS
// are not used: they run whatever Kafka they run. Exits with vitest's status; the run ends with its
// `N passed, N failed`.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ENV_CASSANDRA_CONTACT_POINTS, ENV_KAFKA_BROKERS, ENV_KAFKA_VERSION, KAFKA_COMPAT_VERSION } from './services/config.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const VITEST = join(REPO, 'node_modules', 'vitest', 'vitest.mjs');

const env: NodeJS.ProcessEnv = { ...process.env, SHARDHERD_KAFKA_COMPAT: '1', [ENV_KAFKA_VERSION]: KAFKA_COMPAT_VERSION };
delete env[ENV_KAFKA_BROKERS];
delete env[ENV_CASSANDRA_CONTACT_POINTS];
process.stderr.write(`[kafka-compat] Kafka ${KAFKA_COMPAT_VERSION}: vitest run --project kafka-compat\n`);
const run = spawnSync(process.execPath, [VITEST, 'run', '--project', 'kafka-compat', ...process.argv.slice(2)], { cwd: REPO, stdio: 'inherit', env });
process.exit(run.status ?? 1);
