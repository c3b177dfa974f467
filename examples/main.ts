// Runs one example: `npm run example -- <name> [--kafka] [flags]`. Without `--kafka` the example
// brings its own embedded cluster (one process, no services); with it, it connects to a real
// cluster such as the one `npm run cluster` runs. See examples/README.md.
import { parseArgs } from 'node:util';
import { gateway } from './gateway.js';
import { ingestionWorker } from './ingestion-worker.js';
import { router } from './router.js';

/** Where a real cluster is: flags first, then the environment, then the local cluster's defaults. */
export interface RealCluster {
  readonly brokers: readonly string[];
  /** The cluster's name (`cluster` in its nodes' configs): the prefix of its bus topics. */
  readonly prefix: string;
  readonly cassandra: readonly string[];
  readonly keyspace: string;
}

const EXAMPLES = { router, 'ingestion-worker': ingestionWorker, gateway } as const;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    kafka: { type: 'boolean', default: false },
    brokers: { type: 'string' },
    prefix: { type: 'string' },
    cassandra: { type: 'string' },
    keyspace: { type: 'string' },
  },
});
const name = positionals[0];
if (name === undefined || !(name in EXAMPLES)) {
  process.stderr.write(`usage: npm run example -- <${Object.keys(EXAMPLES).join('|')}> [--kafka [--brokers h:p,...] [--prefix local] [--cassandra h:p,...] [--keyspace shardherd_local]]\n`);
  process.exit(2);
}
const list = (s: string) => s.split(',').map((x) => x.trim()).filter((x) => x !== '');
const real: RealCluster | undefined = values.kafka
  ? {
      brokers: list(values.brokers ?? process.env.SHARDHERD_KAFKA_BROKERS ?? '127.0.0.1:9092'),
      prefix: values.prefix ?? process.env.SHARDHERD_CLUSTER ?? 'local',
      cassandra: list(values.cassandra ?? process.env.SHARDHERD_CASSANDRA_CONTACT_POINTS ?? '127.0.0.1:9042'),
      keyspace: values.keyspace ?? 'shardherd_local',
    }
  : undefined;
await EXAMPLES[name as keyof typeof EXAMPLES](real);
