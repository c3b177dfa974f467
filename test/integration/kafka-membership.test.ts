// KafkaMembership against the real broker: views, the leader's assignment, a graceful leave, a
// member killed with SIGKILL, and a member stopped past its session timeout that fences itself.
// The killed and stopped members run in child processes (fixtures/membership-member.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { AssignerProtocol, Kafka, logLevel } from 'kafkajs';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import {
  KafkaMembership,
  decodeMemberMetadata,
  encodeMemberMetadata,
  liveMembers,
  planMembershipAssignment,
  type KafkaMembershipOptions,
} from '../../src/cluster/kafka-membership.js';
import type { MembershipView } from '../../src/cluster/membership.js';
import { incarnation, nodeId } from '../../src/core/ids.js';
import type { Member } from '../../src/core/shard-manager/protocol.js';
import { KAFKA_CLIENT_LIBRARIES, type KafkaClientLibrary } from '../../src/cluster/kafka-options.js';
import { services, uniqueName } from './support.js';

const REPO = resolve(import.meta.dirname, '../..');
const FIXTURE = resolve(import.meta.dirname, 'fixtures/membership-member.ts');
/** Short, for fast failure detection; the test broker allows down to 1000 ms. */
const SESSION_MS = 1500;
const log = pino({ level: 'silent' });

const key = (m: Pick<Member, 'node' | 'incarnation'>): string => `${m.node}@${m.incarnation}`;
const keys = (view: MembershipView): string[] => view.members.map(key);

interface Seen {
  readonly at: number;
  readonly view: MembershipView;
}

interface ChildMember {
  readonly proc: ChildProcess;
  readonly key: string;
  /** The fixture's stdout lines, with the time (performance.now) this process read them. */
  readonly lines: { readonly at: number; readonly line: { type: string; view?: MembershipView; fenced?: string; message?: string } }[];
  stderr: string;
}

const handles: KafkaMembership[] = [];
const children: ChildMember[] = [];

afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
  }
  await Promise.all(handles.splice(0).map((h) => h.close()));
});

function membership(options: Omit<KafkaMembershipOptions, 'brokers' | 'clientId' | 'log'>): KafkaMembership {
  const h = new KafkaMembership({ brokers: services().kafkaBrokers, clientId: 'membership-it', log, ...options });
  handles.push(h);
  return h;
}

function record(h: KafkaMembership): Seen[] {
  const seen: Seen[] = [];
  h.onChange((view) => seen.push({ at: performance.now(), view }));
  return seen;
}

/** Polls `condition` every 10 ms; resolves with the time it first held. */
async function until(what: string, condition: () => boolean, timeoutMs: number): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (condition()) return performance.now();
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function spawnMember(options: { client: KafkaClientLibrary; topicPrefix: string; node: string; incarnation: string }): ChildMember {
  const args = JSON.stringify({ brokers: services().kafkaBrokers, sessionTimeoutMs: SESSION_MS, rack: 'rack-c', ...options });
  const proc = spawn(process.execPath, ['--import', 'tsx', FIXTURE, args], {
    cwd: REPO,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, FORCE_COLOR: '0' },
  });
  const child: ChildMember = { proc, key: `${options.node}@${options.incarnation}`, lines: [], stderr: '' };
  createInterface({ input: proc.stdout! }).on('line', (line) =>
    child.lines.push({ at: performance.now(), line: JSON.parse(line) as ChildMember['lines'][number]['line'] }),
  );
  proc.stderr!.on('data', (chunk: Buffer) => (child.stderr += chunk.toString()));
  children.push(child);
  return child;
}

async function childJoined(child: ChildMember): Promise<void> {
  await until(
    `${child.key} joined (stderr: ${child.stderr.slice(-500)})`,
    () => {
      const error = child.lines.find((l) => l.line.type === 'error');
      if (error) throw new Error(`${child.key} could not join: ${error.line.message}`);
      return child.lines.some((l) => l.line.type === 'joined');
    },
    30_000,
  );
}

/** Who holds partition 0 of the members topic, by the assignment the group leader made. */
async function partitionZeroHolder(prefix: string): Promise<string[]> {
  const kafka = new Kafka({ clientId: 'membership-it-admin', brokers: services().kafkaBrokers, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  try {
    const { groups } = await admin.describeGroups([`${prefix}.members`]);
    const holders: string[] = [];
    for (const m of groups[0]?.members ?? []) {
      const assignment = AssignerProtocol.MemberAssignment.decode(m.memberAssignment);
      const decoded = decodeMemberMetadata(m.memberMetadata);
      if (assignment?.assignment[`${prefix}.members`]?.includes(0) && decoded.ok) holders.push(decoded.value.node);
    }
    return holders;
  } finally {
    await admin.disconnect();
  }
}

describe.each(KAFKA_CLIENT_LIBRARIES)('KafkaMembership on a real Kafka consumer group, on %s', (client) => {
  it('the leader gives partition 0 of the members topic to the oldest member only, ignores foreign members and counts a restarted node once', () => {
    const topic = 'c1.members';
    const member = (node: string, inc: string, joinedAt: number): Member => ({ node: nodeId(node), incarnation: incarnation(inc), joinedAt });
    const metadata = (m: Member) => encodeMemberMetadata(m, [topic]);
    const group = [
      { memberId: 'm-new', memberMetadata: metadata(member('n1', 'i2', 300)) }, // n1 restarted: its old incarnation is still in the group
      { memberId: 'm-foreign', memberMetadata: AssignerProtocol.MemberMetadata.encode({ version: 0, topics: [topic], userData: Buffer.from('{"format":0}') }) },
      { memberId: 'm-old', memberMetadata: metadata(member('n1', 'i1', 100)) },
      { memberId: 'm-n2', memberMetadata: metadata(member('n2', 'j1', 200)) },
    ];
    const assigned = (topics: string[]) =>
      Object.fromEntries(
        planMembershipAssignment(group, topics, topic).map((a) => [a.memberId, AssignerProtocol.MemberAssignment.decode(a.memberAssignment)?.assignment]),
      );
    expect(assigned([topic])).toEqual({ 'm-new': {}, 'm-foreign': {}, 'm-old': {}, 'm-n2': { [topic]: [0] } });
    expect(assigned(['other'])).toEqual({ 'm-new': {}, 'm-foreign': {}, 'm-old': {}, 'm-n2': {} });
    const decoded = group.map((g) => decodeMemberMetadata(g.memberMetadata));
    expect(decoded[1]).toMatchObject({ ok: false, error: expect.stringContaining('format') });
    const ours = decoded.flatMap((d) => (d.ok ? [{ member: d.value }] : []));
    expect(liveMembers(ours).map((e) => key(e.member))).toEqual(['n2@j1', 'n1@i2']);
  });

  it('three members see the same view, oldest first, with their metadata; the oldest holds partition 0; a graceful leave is seen at once', async () => {
    const prefix = uniqueName('members');
    // A long session timeout: a leave seen within half of it cannot be the broker timing the member out.
    const sessionTimeoutMs = 6_000;
    const specs = [
      { node: nodeId('n1'), incarnation: incarnation('i1'), rack: 'rack-a', address: '127.0.0.1:7001' },
      { node: nodeId('n2'), incarnation: incarnation('i2'), rack: 'rack-b', address: '127.0.0.1:7002' },
      { node: nodeId('n3'), incarnation: incarnation('i3'), rack: 'rack-a', address: '127.0.0.1:7003' },
    ];
    const members = specs.map(() => membership({ client, topicPrefix: prefix, sessionTimeoutMs, heartbeatIntervalMs: 300 }));
    const joinMs: number[] = [];
    for (const [i, spec] of specs.entries()) {
      const started = performance.now();
      const view = await members[i]!.join(spec);
      joinMs.push(Math.round(performance.now() - started));
      expect(keys(view)).toContain(key(spec));
    }

    const all = specs.map(key);
    await until('every member sees all three', () => members.every((m) => keys(m.view()).join() === all.join()), 15_000);
    const view = members[0]!.view();
    expect(view.members.map(({ joinedAt: _, ...m }) => m)).toEqual(specs);
    expect(view.members[0]!.joinedAt).toBeLessThan(view.members[1]!.joinedAt);
    expect(view.members[1]!.joinedAt).toBeLessThan(view.members[2]!.joinedAt);
    for (const m of members) expect(m.view().members).toEqual(view.members);
    expect(await partitionZeroHolder(prefix)).toEqual(['n1']);

    // The oldest (the singleton's host) leaves: the others see it go, and n2 becomes the oldest.
    const seen = members.slice(1).map(record);
    const left = performance.now();
    await members[0]!.leave();
    expect(keys(members[0]!.view())).toEqual(all.slice(1));
    const seenAt = await until('n2 and n3 see n1 go', () => members.slice(1).every((m) => keys(m.view()).join() === all.slice(1).join()), sessionTimeoutMs);
    const leaveMs = Math.round(seenAt - left);
    expect(leaveMs).toBeLessThan(sessionTimeoutMs / 2);
    // One change each: n1 went, nothing in between.
    for (const s of seen) expect(s.map((x) => keys(x.view))).toEqual([all.slice(1)]);
    await expect.poll(() => partitionZeroHolder(prefix), { timeout: 10_000, interval: 200 }).toEqual(['n2']);
    console.info(
      `[kafka-membership] join: ${joinMs.join(', ')} ms; a graceful leave seen by the others after ${leaveMs} ms (session timeout ${sessionTimeoutMs} ms)`,
    );
  });

  /** Members a and b in this process and c in a child process, all three in everyone's view. */
  const twoMembersAndAChild = async () => {
    const prefix = uniqueName('members');
    const a = membership({ client, topicPrefix: prefix, sessionTimeoutMs: SESSION_MS });
    const b = membership({ client, topicPrefix: prefix, sessionTimeoutMs: SESSION_MS });
    await a.join({ node: nodeId('a'), incarnation: incarnation('a1') });
    await b.join({ node: nodeId('b'), incarnation: incarnation('b1') });
    const c = spawnMember({ client, topicPrefix: prefix, node: 'c', incarnation: 'c1' });
    await childJoined(c);
    await until('a and b see c', () => [a, b].every((h) => keys(h.view()).join() === 'a@a1,b@b1,c@c1'), 15_000);
    return { prefix, a, b, c };
  };

  it('a member killed with SIGKILL is removed from the others’ views after about the session timeout', async () => {
    const { a, b, c } = await twoMembersAndAChild();
    expect(a.view().members[2]).toMatchObject({ node: 'c', rack: 'rack-c' });
    const seen = [a, b].map(record);

    const killed = performance.now();
    c.proc.kill('SIGKILL');
    await until('a and b see c go', () => [a, b].every((h) => keys(h.view()).join() === 'a@a1,b@b1'), SESSION_MS + 8_000);
    const detectMs = seen.map((s) => Math.round(s.find((x) => !keys(x.view).includes('c@c1'))!.at - killed));
    // c's last heartbeat came at most a heartbeat interval plus a fetch wait (about 600 ms) before the kill.
    for (const ms of detectMs) {
      expect(ms).toBeGreaterThanOrEqual(SESSION_MS - 700);
      expect(ms).toBeLessThan(SESSION_MS + 5_000);
    }
    expect(b.view().members).toEqual(a.view().members);
    console.info(`[kafka-membership] SIGKILLed member removed after ${detectMs.join(' / ')} ms (session timeout ${SESSION_MS} ms)`);
  });

  it('a member stopped (SIGSTOP) past its session timeout fences itself on SIGCONT and never comes back under the same incarnation', async () => {
    const { a, b, c } = await twoMembersAndAChild();
    const seen = [a, b].map(record);

    const stopped = performance.now();
    c.proc.kill('SIGSTOP');
    await until('a and b see c go', () => [a, b].every((h) => keys(h.view()).join() === 'a@a1,b@b1'), SESSION_MS + 8_000);
    const removedMs = Math.round(performance.now() - stopped);
    await new Promise((r) => setTimeout(r, Math.max(0, stopped + 2 * SESSION_MS - performance.now())));
    const linesBefore = c.lines.length;
    const continued = performance.now();
    c.proc.kill('SIGCONT');

    // The child's own view drops it (self-fencing) as soon as it runs again: its timer sees the
    // gap, before kafkajs learns from the broker that the member is gone and rejoins.
    const fencedAt = await until(
      'c announces a view without itself',
      () => c.lines.slice(linesBefore).some((l) => l.line.type === 'view' && !keys(l.line.view!).includes('c@c1')),
      5_000,
    );
    const fenceMs = Math.round(fencedAt - continued);
    expect(fenceMs).toBeLessThan(1_000);
    const fenceView = c.lines.slice(linesBefore).find((l) => l.line.type === 'view')!.line;
    expect(keys(fenceView.view!)).toEqual(['a@a1', 'b@b1']);
    expect(fenceView.fenced).toMatch(/^this process did not run for \d+ ms/);
    // Give a rejoin under c1 every chance to show up, then check nobody ever saw c1 again.
    await new Promise((r) => setTimeout(r, 3 * SESSION_MS));
    for (const s of seen) {
      const firstWithout = s.findIndex((x) => !keys(x.view).includes('c@c1'));
      expect(firstWithout).toBeGreaterThanOrEqual(0);
      expect(s.slice(firstWithout).filter((x) => keys(x.view).includes('c@c1'))).toEqual([]);
    }
    const after = c.lines.slice(linesBefore).map((l) => l.line);
    expect(after.filter((l) => l.type === 'view' && keys(l.view!).includes('c@c1'))).toEqual([]);
    console.info(
      `[kafka-membership] SIGSTOPped member removed after ${removedMs} ms; on SIGCONT (after ${Math.round(continued - stopped)} ms) it fenced itself in ${fenceMs} ms`,
    );
  });

  it('join fails with a clear error when no broker answers within joinTimeoutMs', async () => {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as { port: number };
    await new Promise((r) => server.close(r)); // nothing listens there any more
    const h = new KafkaMembership({
      client,
      brokers: [`127.0.0.1:${port}`],
      clientId: 'membership-it',
      log,
      topicPrefix: uniqueName('members'),
      sessionTimeoutMs: SESSION_MS,
      joinTimeoutMs: 2_000,
    });
    handles.push(h);
    const started = performance.now();
    await expect(h.join({ node: nodeId('lonely'), incarnation: incarnation('l1') })).rejects.toMatchObject({
      name: 'KafkaMembershipError',
      code: 'JOIN_TIMEOUT',
      retriable: true,
      message: expect.stringMatching(new RegExp(`^lonely could not join the group .*\\.members at 127\\.0\\.0\\.1:${port} within 2000 ms`)),
    });
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(h.view().members).toEqual([]);
  });
});

describe('KafkaMembership across client libraries', () => {
  it('members on kafkajs and @platformatic/kafka share the group: each sees every member, oldest first, and a leave of either', async () => {
    const prefix = uniqueName('members-mixed');
    const onKafkajs = membership({ client: 'kafkajs', topicPrefix: prefix, sessionTimeoutMs: SESSION_MS });
    const onPlatformatic = membership({ client: 'platformatic', topicPrefix: prefix, sessionTimeoutMs: SESSION_MS });
    await onKafkajs.join({ node: nodeId('a'), incarnation: incarnation('a1') });
    await onPlatformatic.join({ node: nodeId('b'), incarnation: incarnation('b1') });
    await until('both see both', () => [onKafkajs, onPlatformatic].every((h) => keys(h.view()).join() === 'a@a1,b@b1'), 15_000);
    expect(await partitionZeroHolder(prefix)).toEqual(['a']);

    await onKafkajs.leave();
    await until('b sees a go', () => keys(onPlatformatic.view()).join() === 'b@b1', 10_000);
    expect(await partitionZeroHolder(prefix)).toEqual(['b']);
  });
});
