// The singleton's performer: carries out one effect of its step, and answers the calls (store
// reads, the source's check, a decision, the lease) with the message their result is stepped as.
import { inboxGroup, inboxStart } from '../inbox-group.js';
import { limitedLog } from '../log-limiter.js';
import { skipMalformed } from '../node-env.js';
import { performDecision } from './decision.js';
import type { Produce, SingletonEffect } from './effects.js';
import type { SingletonShell } from './shell.js';
import { MAX_QUEUED_REPORTS } from './step.js';
import type { SingletonState, StepMsg } from './state.js';

type Answer = StepMsg | undefined | Promise<StepMsg | undefined>;

export function performEffect(sh: SingletonShell, e: SingletonEffect, s: SingletonState): Answer {
  const { env } = sh;
  switch (e.type) {
    case 'Log':
      sh.log[e.level](e.fields, e.message);
      return undefined;
    case 'Schedule':
      sh.later(e.afterMs, () => env.runtime.send(sh.self, e.msg));
      return undefined;
    case 'Send':
      env.runtime.send(sh.self, e.msg);
      return undefined;
    case 'Produce':
      sh.mustAct(e.act);
      sh.sendLater(e.what, produce(sh, e));
      return undefined;
    case 'CommitInbox':
      sh.commit(e.lastOffset);
      return undefined;
    case 'HeardMapFormat':
      sh.mapReaders.heard(e.subscriber, e.mapFormat);
      return undefined;
    case 'HeardNodeMapFormat':
      sh.mapReaders.heardFromNode(e.node, e.incarnation, e.mapFormat);
      return undefined;
    case 'Malformed':
      skipMalformed({ log: sh.log, telemetry: env.telemetry }, e.record, e.reason);
      return undefined;
    case 'ReportsDropped':
      return reportsDropped(sh, e.queued);
    case 'CountEviction':
      env.telemetry.detectorEvicted();
      return undefined;
    case 'Recovered':
      env.telemetry.singletonRecovered(e.recoveryMs);
      return undefined;
    case 'InboxDone':
      if (sh.inboxQueue.length > 0) env.runtime.send(sh.self, { type: 'Inbox' });
      return undefined;
    default:
      return call(sh, e, s);
  }
}

/** The effects that wait for something (the store, the bus, the source, a decision), and the answers of those that have one. */
function call(sh: SingletonShell, e: SingletonEffect, s: SingletonState): Promise<StepMsg | undefined> | undefined {
  switch (e.type) {
    case 'ReadStore':
      return readStore(sh);
    case 'ReadInboxStart':
      return readInboxStart(sh);
    case 'Subscribe':
      return subscribe(sh, e.startAt);
    case 'CommitInboxStart':
      return commitInboxStart(sh, e.startAt);
    case 'Validate':
      return validate(sh, e);
    case 'Decide':
      return performDecision(sh, e, s);
    case 'ReadLease':
      return readLease(sh);
    case 'StopSelf':
      return stopSelf(sh, e.reason);
    default:
      return undefined;
  }
}

async function readInboxStart(sh: SingletonShell): Promise<StepMsg> {
  return { type: 'InboxStartRead', startAt: await sh.retrying('reading the inbox position', () => inboxStart(sh.env.bus, sh.env.topics.inbox, sh.epoch)) };
}

async function subscribe(sh: SingletonShell, startAt: number | undefined): Promise<undefined> {
  const { env } = sh;
  const inbox = env.topics.inbox;
  sh.inbox = await env.bus.subscribe(inbox, inboxGroup(inbox, sh.epoch), (record) => sh.onRecord(record), {
    start: 'earliest',
    ...(startAt === undefined ? {} : { startAt }),
    onError: (err, r) => sh.log.error({ err, offset: r.offset }, 'inbox record not handled'),
  });
  return undefined;
}

async function commitInboxStart(sh: SingletonShell, startAt: number): Promise<undefined> {
  await sh.retrying('committing the inbox position', () => sh.inbox!.commit(startAt));
  return undefined;
}

async function validate(sh: SingletonShell, e: Extract<SingletonEffect, { type: 'Validate' }>): Promise<StepMsg> {
  return { type: 'Validated', request: e.request, refusal: await refusal(sh, e.request.config), then: e.then };
}

async function readLease(sh: SingletonShell): Promise<StepMsg> {
  const lease = await sh.retrying('reading the lease', () => sh.env.lease.readLease());
  return { type: 'LeaseRead', epoch: lease?.epoch };
}

async function stopSelf(sh: SingletonShell, reason: string): Promise<StepMsg> {
  await sh.stopSelf(reason);
  return { type: 'Stopped' };
}

/** What recovery starts from, read in this order. */
async function readStore(sh: SingletonShell): Promise<StepMsg> {
  const { metaStore } = sh.env;
  const stored = {
    datasets: await sh.retrying('reading datasets', () => metaStore.datasets()),
    maps: await sh.retrying('reading shard maps', () => metaStore.shardMaps()),
    cooldowns: await sh.retrying('reading cooldowns', () => metaStore.cooldowns()),
    subscriptions: await sh.retrying('reading subscriptions', () => metaStore.subscriptions()),
    operations: await sh.retrying('reading node operations', () => metaStore.nodeOperations()),
    applied: await sh.retrying('reading the applied requests', () => metaStore.appliedRequests()),
  };
  return { type: 'StoreRead', stored };
}

/**
 * A new dataset must be readable before it is accepted: with Kafka, its topic must exist with
 * exactly numShards partitions. A refusal is a `BadData` reply saying why; nothing is stored.
 * A dataset that exists already is not checked: the core answers it exists, or conflicts,
 * without its source. Checking it asked the broker for every setup request a new singleton
 * replays from the inbox after a failover, and a broker that was frozen and came back can leave
 * such a request hanging for minutes, the singleton answering nothing meanwhile (the
 * broker-faults test saw it: no singleton for two minutes after a SIGSTOP and SIGCONT).
 */
async function refusal(sh: SingletonShell, config: Extract<SingletonEffect, { type: 'Validate' }>['request']['config']): Promise<string | undefined> {
  const { source } = sh.env;
  if (!source.validate) return undefined;
  try {
    await source.validate(config);
    return undefined;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}

function produce(sh: SingletonShell, e: Produce): Promise<unknown> {
  switch (e.topic) {
    case 'inbox':
      return sh.env.bus.produce(sh.env.topics.inbox, e.message);
    case 'events':
      return sh.produceEvents(e.message);
    case 'replies':
      return sh.produceReplies(e.message);
  }
}

function reportsDropped(sh: SingletonShell, queued: number): undefined {
  const { log } = sh;
  // The summary at the window's end says how many wait then.
  limitedLog(log, sh.env.clock, 'reports.dropped', (more) =>
    log.warn(
      { event: 'reports.dropped', reports: more || 1, queued: more === 0 ? queued : sh.latest.reports.length },
      `${more || 1} report(s) dropped unacknowledged: ${MAX_QUEUED_REPORTS} wait to be applied already; their nodes send them again`,
    ),
  );
  return undefined;
}
