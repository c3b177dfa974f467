// The admin subcommands of `shardherd` (status, datasets, members, shards start|stop, dataset
// setup|remove, node drain|undrain|replace) as commander commands that produce a plain
// `AdminCommand`: parsing stays pure, run-admin.ts does the I/O.
import { Command, InvalidArgumentError, Option } from 'commander';

export type AdminAction =
  | { readonly type: 'status' }
  | { readonly type: 'datasets' }
  | { readonly type: 'members' }
  | { readonly type: 'shards-start'; readonly dataset: string; readonly node: string; readonly shards: readonly number[] }
  | { readonly type: 'shards-stop'; readonly dataset: string; readonly shards: readonly number[] }
  | { readonly type: 'dataset-setup'; readonly file: string; readonly createTopic: boolean }
  | { readonly type: 'dataset-remove'; readonly dataset: string }
  | { readonly type: 'node-drain' | 'node-undrain'; readonly node: string }
  | { readonly type: 'node-replace'; readonly node: string; readonly with: string }
  | { readonly type: 'placement-explain'; readonly dataset: string }
  | { readonly type: 'placement-pause' | 'placement-resume'; readonly dataset: string };

/** Where to send the request and with what: flags first, then the environment and files (see run-admin.ts). */
export interface AdminConnection {
  readonly url: string | undefined;
  readonly token: string | undefined;
  readonly configPath: string | undefined;
  readonly json: boolean;
}

export interface AdminCommand {
  readonly action: AdminAction;
  readonly connection: AdminConnection;
}

interface ConnectionFlags {
  url?: string;
  token?: string;
  config?: string;
  json?: boolean;
}

function shardList(raw: string): number[] {
  const shards = raw.split(',').map((s) => s.trim());
  if (shards.some((s) => !/^\d+$/.test(s))) throw new InvalidArgumentError(`--shards must be comma-separated shard numbers like 0,3,7, got "${raw}".`);
  return shards.map(Number);
}

/** The commands that change the cluster, and so send a token: every admin command but the three reads. */
const READS = new Set(['status', 'datasets', 'members', 'explain']);
const needsToken = (c: Command): boolean => !READS.has(c.name());

const TOKEN_HELP = `
This command changes the cluster and sends a bearer token. Without --token it takes, in order,
$SHARDHERD_TOKEN, the token of the --config file, or the token file a node on this machine wrote for
the --url port (only for a local --url), and says on stderr when it used that file.
`;

function withConnection(cmd: Command): Command {
  return cmd
    .addOption(new Option('--url <url>', "a node's HTTP address (default: the --config file's status endpoint, else http://127.0.0.1:8080)"))
    .addOption(
      new Option(
        '--token <token>',
        "bearer token for commands that change the cluster (default: $SHARDHERD_TOKEN, the config's, or the local node's token file)",
      ),
    )
    .addHelpText('after', (ctx) => (needsToken(ctx.command) ? TOKEN_HELP : ''))
    .addOption(new Option('--config <file>', 'a node configuration file to take the URL and token from'))
    .addOption(new Option('--json', "print the node's JSON answer instead of a table"))
    .allowExcessArguments(false)
    .allowUnknownOption(false);
}

/** Adds the admin commands to `program`; `done` receives the parsed command. */
export function addAdminCommands(program: Command, configure: (c: Command) => Command, done: (command: AdminCommand) => void): void {
  const leaf = (parent: Command, name: string, description: string) => {
    const c = withConnection(configure(new Command(name).description(description)));
    parent.addCommand(c);
    return c;
  };
  const finish = (flags: ConnectionFlags, action: AdminAction) =>
    done({ action, connection: { url: flags.url, token: flags.token, configPath: flags.config, json: flags.json ?? false } });

  leaf(program, 'status', "the cluster at a glance: singleton, members, each dataset's shards by status and why any lack copies").action(
    (flags: ConnectionFlags) => finish(flags, { type: 'status' }),
  );
  leaf(program, 'datasets', 'the datasets with their map stamp and shard counts').action((flags: ConnectionFlags) => finish(flags, { type: 'datasets' }));
  leaf(program, 'members', "the members oldest first, with rack, copies and the singleton's host").action((flags: ConnectionFlags) =>
    finish(flags, { type: 'members' }),
  );

  const shards = configure(new Command('shards').description("start or stop shards of a dataset (FiloDB's startshards/stopshards)"));
  program.addCommand(shards);
  leaf(shards, 'start', 'start stopped or unassigned shards on a node')
    .argument('<dataset>')
    .requiredOption('--node <node>', 'the node to start them on')
    .requiredOption('--shards <list>', 'comma-separated shard numbers', shardList)
    .action((dataset: string, flags: ConnectionFlags & { node: string; shards: number[] }) =>
      finish(flags, { type: 'shards-start', dataset, node: flags.node, shards: flags.shards }),
    );
  // A stopped shard is never placed again by the singleton (see STOPPED_REASON in core): only a start does.
  leaf(shards, 'stop', 'stop shards; they stay stopped (through membership changes, drains and failovers) until `shards start`')
    .argument('<dataset>')
    .requiredOption('--shards <list>', 'comma-separated shard numbers', shardList)
    .action((dataset: string, flags: ConnectionFlags & { shards: number[] }) => finish(flags, { type: 'shards-stop', dataset, shards: flags.shards }));

  const dataset = configure(new Command('dataset').description('set up or remove a dataset'));
  program.addCommand(dataset);
  leaf(dataset, 'setup', 'set up a dataset from a JSON config file (- for stdin); the same config again is a no-op')
    .argument('<file>')
    .option('--create-topic', 'create its Kafka topic with numShards partitions first', false)
    .action((file: string, flags: ConnectionFlags & { createTopic: boolean }) =>
      finish(flags, { type: 'dataset-setup', file, createTopic: flags.createTopic }),
    );
  leaf(dataset, 'remove', 'remove a dataset: its shards stop on every node')
    .argument('<dataset>')
    .action((name: string, flags: ConnectionFlags) => finish(flags, { type: 'dataset-remove', dataset: name }));

  const node = configure(new Command('nodes').description('planned node operations: drain, undrain, replace'));
  program.addCommand(node);
  leaf(node, 'drain', 'hand every copy of a node to the others, new copy first')
    .argument('<node>')
    .action((n: string, flags: ConnectionFlags) => finish(flags, { type: 'node-drain', node: n }));
  leaf(node, 'undrain', 'cancel a drain or a pending replacement')
    .argument('<node>')
    .action((n: string, flags: ConnectionFlags) => finish(flags, { type: 'node-undrain', node: n }));
  leaf(node, 'replace', 'hand each copy of a node to another node (which may join later)')
    .argument('<node>')
    .requiredOption('--with <node>', 'the node that takes its copies')
    .action((n: string, flags: ConnectionFlags & { with: string }) => finish(flags, { type: 'node-replace', node: n, with: flags.with }));

  const placement = configure(
    new Command('placement').description('a load-aware dataset: its load per node, the moves a load round would make, pause and resume'),
  );
  program.addCommand(placement);
  leaf(placement, 'explain', 'each node’s load against its band, and the moves a load round would make now with why (a dry run: nothing moves)')
    .argument('<dataset>')
    .action((name: string, flags: ConnectionFlags) => finish(flags, { type: 'placement-explain', dataset: name }));
  leaf(placement, 'pause', 'stop moving copies for load (joins, drains and lost copies still move); kept through failovers')
    .argument('<dataset>')
    .action((name: string, flags: ConnectionFlags) => finish(flags, { type: 'placement-pause', dataset: name }));
  leaf(placement, 'resume', 'move copies for load again')
    .argument('<dataset>')
    .action((name: string, flags: ConnectionFlags) => finish(flags, { type: 'placement-resume', dataset: name }));
}
