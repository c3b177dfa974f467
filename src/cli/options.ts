// The `shardherd` command line: the default action (the embedded cluster demo) with its flags,
// `shardherd node --config <file>`, one node of a real deployment, `shardherd topics create`, the
// Kafka topics a cluster needs, and the admin commands (./admin).
// Parsing is a pure function of argv, so the tests can check good and bad flags without running
// anything; main.ts does the I/O.
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { addAdminCommands, type AdminCommand } from './admin/admin-command.js';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const MAX_NODES = 32;
export const MAX_DATASETS = 4;
export const MAX_SHARDS = 256;

export interface DemoOptions {
  /** Nodes of the embedded cluster, 3..32. */
  readonly nodes: number;
  /** Datasets, 1..4: metrics, logs, traces, events. */
  readonly datasets: number;
  /** Shards per dataset, a power of two in 1..256. */
  readonly shards: number;
  /** Run the scripted story (default), or only the live view until Ctrl-C. */
  readonly story: boolean;
  /** pino level of the cluster's logs (on stderr). */
  readonly logLevel: LogLevel;
  /** Port of the status page and HTTP API (0: any free port); undefined: none. */
  readonly port: number | undefined;
  /**
   * `--port` was given: a port in use is then a usage error (exit 2). Only the default 8080 falls
   * back to a free port, saying so: an operator who named a port expects the page there.
   */
  readonly portGiven: boolean;
}

/** What the command line asks for: run the demo, or print something and exit with `code`. */
export type ParsedCommandLine =
  | { readonly kind: 'run'; readonly options: DemoOptions }
  | { readonly kind: 'node'; readonly configPath: string; readonly logLevel: LogLevel | undefined }
  | { readonly kind: 'topics-create'; readonly configPath: string; readonly datasets: readonly string[] | undefined; readonly logLevel: LogLevel }
  | { readonly kind: 'admin'; readonly command: AdminCommand }
  | { readonly kind: 'exit'; readonly code: number; readonly stdout: string; readonly stderr: string };

/** Exit code for a bad command line (as most CLIs: 2 = usage error). */
export const EXIT_USAGE = 2;

function integer(name: string, min: number, max: number) {
  return (raw: string): number => {
    const n = Number(raw);
    if (!/^\s*\d+\s*$/.test(raw) || !Number.isSafeInteger(n)) throw new InvalidArgumentError(`${name} must be a whole number, got "${raw}".`);
    if (n < min || n > max) throw new InvalidArgumentError(`${name} must be between ${min} and ${max}, got ${n}.`);
    return n;
  };
}

function shardCount(raw: string): number {
  const n = integer('--shards', 1, MAX_SHARDS)(raw);
  if ((n & (n - 1)) !== 0) {
    const lower = 2 ** Math.floor(Math.log2(n));
    throw new InvalidArgumentError(
      `--shards must be a power of two (a dataset's shards are split by the high bits of a hash), got ${n}; try ${lower} or ${lower * 2}.`,
    );
  }
  return n;
}

function program(): Command {
  return new Command('shardherd')
    .description(
      'Runs an embedded shardherd cluster (N nodes in this process, synthetic ingestion) and tells a story:\n' +
        'a node dies, the singleton dies, a poison record hits a shard; then it counts every record.\n' +
        'Ctrl-C stops the cluster cleanly at any time (exit code 0).',
    )
    .addOption(new Option('--nodes <n>', 'nodes in the cluster (3..32)').default(5).argParser(integer('--nodes', 3, MAX_NODES)))
    .addOption(new Option('--datasets <n>', 'datasets: metrics, logs, traces, events (1..4)').default(2).argParser(integer('--datasets', 1, MAX_DATASETS)))
    .addOption(new Option('--shards <n>', `shards per dataset, a power of two (1..${MAX_SHARDS})`).default(16).argParser(shardCount))
    .addOption(new Option('--no-story', 'skip the scripted story: run the cluster with the live view until Ctrl-C'))
    .addOption(new Option('--log-level <level>', 'level of the cluster logs, written to stderr').choices(LOG_LEVELS).default('warn'))
    .addOption(new Option('--port <port>', 'port of the status page and HTTP API (0: any free port)').default(8080).argParser(integer('--port', 0, 65535)))
    .addOption(new Option('--no-http', 'serve no status page or HTTP API'))
    .enablePositionalOptions()
    .allowExcessArguments(false)
    .allowUnknownOption(false);
}

function nodeCommand(): Command {
  return new Command('node')
    .description(
      'Runs one node of a real deployment: Kafka for membership, messages and ingestion, Cassandra for the MetaStore.\n' +
        'SIGTERM or Ctrl-C leaves the cluster gracefully (the singleton moves at once if it ran here).\n' +
        "The topics of the config's Kafka datasets must exist first: shardherd topics create --config <file> creates them.",
    )
    .requiredOption('--config <file>', 'the node configuration, JSON (see config/README.md)')
    .addOption(new Option('--log-level <level>', 'overrides the logLevel of the config').choices(LOG_LEVELS))
    .allowExcessArguments(false)
    .allowUnknownOption(false);
}

function topicsCommand(configure: (c: Command) => Command, done: (parsed: ParsedCommandLine) => void): Command {
  const topics = configure(new Command('topics').description('the Kafka topics a cluster needs before its nodes start'));
  topics.addCommand(
    configure(
      new Command('create')
        .description(
          "Creates the cluster's bus topics (<cluster>.inbox, .events, .replies, .endpoints) and the topic of each Kafka dataset of the config, " +
            "with numShards partitions (partition p is shard p), as the config's kafka section says.\n" +
            'Topics that exist as they should are left as they are; one with another partition count is an error and is never changed.\n' +
            'Exit codes: 0 done, 1 Kafka failed or a topic is not as it should be, 2 a bad config or an unknown --dataset.',
        )
        .requiredOption('--config <file>', 'a node configuration, JSON (see config/README.md): its brokers, cluster and datasets')
        .addOption(new Option('--dataset <ref...>', 'only these datasets of the config (default: every one whose source is Kafka)'))
        .addOption(new Option('--log-level <level>', "level of the Kafka client's logs, written to stderr").choices(LOG_LEVELS).default('error'))
        .allowExcessArguments(false)
        .allowUnknownOption(false)
        .action((opts: { config: string; dataset?: string[]; logLevel: LogLevel }) => {
          done({ kind: 'topics-create', configPath: opts.config, datasets: opts.dataset, logLevel: opts.logLevel });
        }),
    ),
  );
  return topics;
}

/**
 * Every command's hint after an error names the command as it is typed (`shardherd shards stop`),
 * not by its last word alone (`shardherd stop` does not exist). Set once the tree is whole: a
 * command learns its parents only when it is added to them.
 */
function hintWithFullNames(command: Command): void {
  const path: string[] = [];
  for (let c: Command | null = command; c; c = c.parent) path.unshift(c.name());
  command.showHelpAfterError(`(run ${path.join(' ')} --help for the options)`);
  for (const sub of command.commands) hintWithFullNames(sub);
}

/** Parses the arguments after `node main.js` (`process.argv.slice(2)`). Never exits, never prints. */
export function parseCommandLine(argv: readonly string[]): ParsedCommandLine {
  let stdout = '';
  let stderr = '';
  let parsed: ParsedCommandLine | undefined;
  const output = {
    writeOut: (s: string) => {
      stdout += s;
    },
    writeErr: (s: string) => {
      stderr += s;
    },
  };
  const node = nodeCommand()
    .exitOverride()
    .configureOutput(output)
    .action((opts: { config: string; logLevel?: LogLevel }) => {
      parsed = { kind: 'node', configPath: opts.config, logLevel: opts.logLevel };
    });
  const configure = (c: Command) => c.exitOverride().configureOutput(output);
  const cmd = program()
    .exitOverride()
    .configureOutput(output)
    .addCommand(node)
    .action((opts: { nodes: number; datasets: number; shards: number; story: boolean; logLevel: LogLevel; port: number; http: boolean }, command: Command) => {
      const port = opts.http ? opts.port : undefined;
      parsed = {
        kind: 'run',
        options: {
          nodes: opts.nodes,
          datasets: opts.datasets,
          shards: opts.shards,
          story: opts.story,
          logLevel: opts.logLevel,
          port,
          portGiven: port !== undefined && command.getOptionValueSource('port') === 'cli',
        },
      };
    });
  cmd.addCommand(topicsCommand(configure, (p) => (parsed = p)));
  addAdminCommands(cmd, configure, (command) => {
    parsed = { kind: 'admin', command };
  });
  hintWithFullNames(cmd);
  try {
    cmd.parse([...argv], { from: 'user' });
  } catch (e) {
    if (!(e instanceof CommanderError)) throw e;
    // --help and --version end "successfully"; every parse error is a usage error.
    const ok = e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help';
    return { kind: 'exit', code: ok ? 0 : EXIT_USAGE, stdout, stderr };
  }
  return parsed ?? { kind: 'exit', code: EXIT_USAGE, stdout, stderr: `${stderr}shardherd: nothing to do\n` };
}
