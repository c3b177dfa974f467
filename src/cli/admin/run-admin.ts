// Runs an admin command against a node's HTTP API and prints the answer: aligned tables for people,
// the node's JSON with --json for scripts. Exit codes: 0 done, 1 the cluster refused (any 4xx/5xx
// answer), no node answered, or `status` found shards Down or in Error (so a script or a cron job
// notices without parsing the table), 2 bad usage (a flag, a file that cannot be read, no token for
// a command that needs one).
import { readFile } from 'node:fs/promises';
import { count } from '../../core/plural.js';
import { readTokenFile, TOKEN_ENV, tokenFile } from '../../http/access-token.js';
import type { ClusterView, DatasetView, MemberView, ShardView } from '../../http/cluster-view.js';
import { loadNodeConfig } from '../../node/node-config.js';
import type { PlacementExplanation } from '../../core/shard-manager/protocol.js';
import type { AdminAction, AdminCommand, AdminConnection } from './admin-command.js';
import { table } from './table.js';

export const EXIT_OK = 0;
export const EXIT_REFUSED = 1;
export const EXIT_USAGE = 2;

export interface AdminIo {
  readonly stdout: (s: string) => void;
  readonly stderr: (s: string) => void;
  readonly env: NodeJS.ProcessEnv;
  /** Standard input, for `dataset setup -`. */
  readonly stdin: () => Promise<string>;
}

class UsageError extends Error {}

interface Target {
  readonly url: string;
  readonly token: string | undefined;
  /** The local node's token file the token was read from, when neither a flag, the environment nor a config gave one. */
  readonly tokenFile: string | undefined;
}

const DEFAULT_URL = 'http://127.0.0.1:8080';

/** The node to ask and the token: flags, then the config file, then the environment and the local token file. */
async function resolveTarget(c: AdminConnection, env: NodeJS.ProcessEnv): Promise<Target> {
  const config = c.configPath
    ? await loadNodeConfig(c.configPath).catch((e: unknown) => {
        throw new UsageError(e instanceof Error ? e.message : String(e));
      })
    : undefined;
  const status = config?.status;
  const raw = c.url ?? (status ? `http://${status.host}:${status.port}` : DEFAULT_URL);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`--url must be an http URL like ${DEFAULT_URL}, got "${raw}"`);
  }
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  const local = ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
  // An empty variable counts as unset (as a shell's `SHARDHERD_TOKEN=` means).
  const given = c.token ?? (env[TOKEN_ENV] || undefined) ?? status?.token;
  const fromFile = given === undefined && local ? readTokenFile(port, env) : undefined;
  return { url: url.origin, token: given ?? fromFile, tokenFile: fromFile === undefined ? undefined : tokenFile(port, env) };
}

interface Answer {
  readonly status: number;
  readonly body: unknown;
}

async function call(target: Target, method: string, path: string, body?: unknown, needsToken = false): Promise<Answer> {
  if (needsToken && !target.token)
    throw new UsageError(`this command changes the cluster and needs a token: --token, $${TOKEN_ENV}, --config, or the token file of a node on this machine`);
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (needsToken) headers.authorization = `Bearer ${target.token}`;
  const res = await fetch(`${target.url}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: shown as it is
  }
  return { status: res.status, body: parsed };
}

const enc = encodeURIComponent;

async function request(action: AdminAction, target: Target, io: AdminIo): Promise<Answer> {
  switch (action.type) {
    case 'status':
      return call(target, 'GET', '/api/v1/overview');
    case 'datasets':
      return call(target, 'GET', '/api/v1/overview');
    case 'members':
      return call(target, 'GET', '/api/v1/members');
    case 'shards-start':
      return call(target, 'POST', `/api/v1/cluster/${enc(action.dataset)}/startshards`, { address: action.node, shardList: action.shards }, true);
    case 'shards-stop':
      return call(target, 'POST', `/api/v1/cluster/${enc(action.dataset)}/stopshards`, { shardList: action.shards }, true);
    case 'dataset-setup': {
      const text =
        action.file === '-'
          ? await io.stdin()
          : await readFile(action.file, 'utf8').catch((e: unknown) => {
              throw new UsageError(`cannot read ${action.file}: ${e instanceof Error ? e.message : String(e)}`);
            });
      let config: unknown;
      try {
        config = JSON.parse(text);
      } catch (e) {
        throw new UsageError(`${action.file} is not JSON: ${e instanceof Error ? e.message : String(e)}`);
      }
      return call(target, 'POST', `/api/v1/datasets${action.createTopic ? '?createTopic=true' : ''}`, config, true);
    }
    case 'dataset-remove':
      return call(target, 'DELETE', `/api/v1/datasets/${enc(action.dataset)}`, undefined, true);
    case 'node-drain':
      return call(target, 'POST', `/api/v1/nodes/${enc(action.node)}/drain`, undefined, true);
    case 'node-undrain':
      return call(target, 'POST', `/api/v1/nodes/${enc(action.node)}/undrain`, undefined, true);
    case 'node-replace':
      return call(target, 'POST', `/api/v1/nodes/${enc(action.node)}/replace`, { with: action.with }, true);
    case 'placement-explain':
      return call(target, 'GET', `/api/v1/datasets/${enc(action.dataset)}/placement`);
    case 'placement-pause':
    case 'placement-resume':
      return call(target, 'PUT', `/api/v1/datasets/${enc(action.dataset)}/load-balancing`, { paused: action.type === 'placement-pause' }, true);
  }
}

export async function runAdmin(command: AdminCommand, io: AdminIo): Promise<number> {
  let target: Target;
  let answer: Answer;
  try {
    target = await resolveTarget(command.connection, io.env);
    // The file is a silent default otherwise: say which token a change goes with (stderr, so stdout stays the answer).
    if (target.tokenFile !== undefined && changesCluster(command.action))
      io.stderr(`shardherd: no --token, $${TOKEN_ENV} or --config: using the token in ${target.tokenFile}\n`);
    answer = await request(command.action, target, io);
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr(`shardherd: ${e.message}\n`);
      return EXIT_USAGE;
    }
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    const why = cause?.code ?? cause?.message;
    io.stderr(`shardherd: no answer from the node${why ? ` (${why})` : ''}: ${e instanceof Error ? e.message : String(e)}\n`);
    return EXIT_REFUSED;
  }
  if (answer.status >= 400) {
    if (command.connection.json) io.stdout(`${JSON.stringify(answer.body, null, 2)}\n`);
    const b = answer.body as { errorType?: string; error?: string; reason?: string };
    io.stderr(`shardherd: refused (${answer.status} ${b.errorType ?? b.error ?? ''}): ${b.reason ?? JSON.stringify(answer.body)}\n`);
    return EXIT_REFUSED;
  }
  io.stdout(command.connection.json ? `${JSON.stringify(answer.body, null, 2)}\n` : render(command.action, answer.body));
  if (command.action.type === 'status') {
    const failing = failingShards(answer.body as ClusterView);
    if (failing.length > 0) {
      io.stderr(`shardherd: ${failing.map((f) => `${f.dataset}: ${count(f.shards.length, 'shard')} ${f.shards.join(', ')}`).join('; ')} Down or in Error\n`);
      return EXIT_REFUSED;
    }
  }
  return EXIT_OK;
}

/** Whether the action changes the cluster, and so sends the token. */
function changesCluster(action: AdminAction): boolean {
  return action.type !== 'status' && action.type !== 'datasets' && action.type !== 'members' && action.type !== 'placement-explain';
}

/** Per dataset, the shards whose status is Down or Error: what makes `status` exit 1. */
function failingShards(view: ClusterView): { dataset: string; shards: number[] }[] {
  return view.datasets
    .map((d) => ({ dataset: d.name, shards: d.shards.filter((s) => s.status === 'Down' || s.status === 'Error').map((s) => s.shard) }))
    .filter((f) => f.shards.length > 0);
}

/** A person's view of a successful answer. */
function render(action: AdminAction, body: unknown): string {
  switch (action.type) {
    case 'status':
      return renderStatus(body as ClusterView);
    case 'datasets':
      return renderDatasets((body as ClusterView).datasets);
    case 'members':
      return renderMembers((body as { members: MemberView[] }).members);
    case 'shards-start':
      return `started shards ${action.shards.join(', ')} of ${action.dataset} on ${action.node}\n`;
    case 'shards-stop':
      return `stopped shards ${action.shards.join(', ')} of ${action.dataset}\n`;
    case 'dataset-setup': {
      const b = body as { dataset: string; created: boolean };
      return b.created ? `dataset ${b.dataset} set up\n` : `dataset ${b.dataset} already exists with this config: nothing changed\n`;
    }
    case 'dataset-remove':
      return `dataset ${action.dataset} removed\n`;
    case 'node-drain':
    case 'node-undrain':
    case 'node-replace':
      return `${(body as { message: string }).message}\n`;
    case 'placement-explain':
      return renderExplanation(body as PlacementExplanation);
    case 'placement-pause':
    case 'placement-resume':
      return `moves for load of ${action.dataset} ${(body as { paused: boolean }).paused ? 'paused' : 'resumed'}\n`;
  }
}

/** A load-aware dataset's view: each node against its band, then the moves a round would make and why. */
function renderExplanation(e: PlacementExplanation): string {
  const f = (x: number) => (Number.isFinite(x) ? x.toPrecision(4) : '-');
  const lines = [
    `${e.dataset}: ${e.verdict} — ${e.message}`,
    `measure ${e.measure}, band ±${e.band * 100} %, trigger ±${e.triggerBand * 100} %${e.paused ? ', PAUSED' : ''}; ${e.measured} of ${e.serving} served shards measured; ${e.movesLastHour} of ${e.maxMovesPerHour} moves this hour, at most ${e.maxConcurrentMoves} a round (${e.maxConcurrentMovesPerNode} a node)`,
    '',
    table(
      ['NODE', 'WEIGHT', 'COPIES', 'LOAD', 'SHARE', 'LOAD/SHARE', 'BAND', 'HOT SHARD'],
      e.nodes.map((n) => [
        n.node,
        String(n.weight),
        String(n.copies),
        f(n.load),
        f(n.share),
        n.share > 0 ? (n.load / n.share).toFixed(3) : '-',
        `${f(n.lo)}..${f(n.hi)}`,
        n.hotShard === undefined ? '' : String(n.hotShard),
      ]),
    ).replace(/\n$/, ''),
  ];
  const refused = Object.entries(e.refused);
  if (refused.length > 0) lines.push('', `refused figures: ${refused.map(([why, n]) => `${n} ${why}`).join(', ')}`);
  if (e.moves.length === 0) lines.push('', 'no move planned');
  else {
    lines.push('', `moves a load round would make (load outside the band ${f(e.outsideBefore)} -> ${f(e.outsideAfter)}):`);
    lines.push(
      table(
        ['SHARD', 'FROM', 'TO', 'LOAD', 'WHY'],
        e.moves.map((m) => [String(m.shard), m.from, m.to, f(m.load ?? Number.NaN), m.why]),
      ).replace(/\n$/, ''),
    );
  }
  return `${lines.join('\n')}\n`;
}

function renderMembers(members: readonly MemberView[]): string {
  return table(
    ['NODE', 'RACK', 'WEIGHT', 'COPIES', 'SINGLETON', 'INCARNATION', 'ADDRESS'],
    members.map((m) => [m.node, m.rack ?? '-', String(m.weight), String(m.copies), m.singleton ? 'yes' : '', m.incarnation, m.address ?? '-']),
  );
}

const STATUS_ORDER = ['Active', 'Recovery', 'Assigned', 'Error', 'Stopped', 'Down', 'Unassigned'] as const;

function renderDatasets(datasets: readonly DatasetView[]): string {
  if (datasets.length === 0) return 'no datasets\n';
  return table(
    ['DATASET', 'SHARDS', 'RF', 'STRATEGY', 'EPOCH', 'VERSION', 'STATUS'],
    datasets.map((d) => [
      d.name,
      String(d.numShards),
      String(d.replicationFactor),
      d.strategy,
      String(d.epoch),
      String(d.version),
      STATUS_ORDER.filter((s) => d.counts[s])
        .map((s) => `${s} ${d.counts[s]}`)
        .join(', '),
    ]),
  );
}

/** What made a shard or its copies fail (the ingestion error's message), first of all in the WHY column. */
function causes(s: ShardView): string[] {
  const own = s.error === undefined ? [] : [`failed: ${s.error}`];
  const copies = s.owners.flatMap((o) => (o.error === undefined || o.error === s.error ? [] : [`copy on ${o.node} failed: ${o.error}`]));
  return [...own, ...copies];
}

function renderStatus(view: ClusterView): string {
  const lines: string[] = [];
  lines.push(view.singleton ? `singleton: ${view.singleton.node} (epoch ${view.singleton.epoch})` : 'singleton: none');
  lines.push(`answered by: ${view.answeredBy.node}`, '');
  lines.push(renderMembers(view.members));
  lines.push(renderDatasets(view.datasets));
  for (const d of view.datasets) {
    const lacking = d.shards.filter((s) => s.reason !== undefined || causes(s).length > 0);
    if (lacking.length === 0) continue;
    lines.push(`${d.name}: shards without all their copies, or failing`);
    lines.push(
      table(
        ['SHARD', 'STATUS', 'COPIES', 'WHY'],
        lacking.map((s) => [
          String(s.shard),
          s.status,
          `${s.owners.length}/${d.replicationFactor}`,
          [...causes(s), ...(s.reason ? [s.reason] : [])].join('; '),
        ]),
      ),
    );
  }
  const ops = view.operations;
  if (ops.draining.length > 0) lines.push(`draining: ${ops.draining.join(', ')}`);
  for (const r of ops.replacements) lines.push(`replacing: ${r.old} -> ${r.new}`);
  return `${lines.join('\n').replace(/\n+$/, '')}\n`;
}
