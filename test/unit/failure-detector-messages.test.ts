// The failure detector's frames (docs/ARCHITECTURE.md §11.10): every message survives its own
// encoding; what is not a detector frame of this cluster is refused with its cause; drops are counted
// by cause and reported once per cause.
import { describe, expect, it } from 'vitest';
import { DroppedFrames } from '../../src/cluster/failure-detector/dropped.js';
import { DETECTOR_FORMAT, encodeFrame, MAX_FRAME_BYTES, parseFrame, type DetectorMessage } from '../../src/cluster/failure-detector/messages.js';
import { incarnation, nodeId } from '../../src/core/ids.js';

const a = { node: nodeId('a'), incarnation: incarnation('a-1') };
const s = { node: nodeId('s'), incarnation: incarnation('s-1') };
const base = { format: DETECTOR_FORMAT, cluster: 'metrics', from: a, to: s, seq: 7 } as const;

const MESSAGES: DetectorMessage[] = [
  { ...base, type: 'heartbeat' },
  { ...base, from: s, to: a, type: 'grant', epoch: 3, leaseMs: 500, heartbeatIntervalMs: 100 },
  { ...base, from: s, to: a, type: 'evicted', epoch: 3 },
  { ...base, type: 'ping' },
  { ...base, type: 'ack' },
  { ...base, from: s, type: 'ping-req', epoch: 3, target: a, address: '10.0.0.7:7100' },
  { ...base, type: 'vote', target: a, vote: 'refused' },
  { ...base, type: 'goodbye' },
];

const frameText = (m: unknown) => JSON.stringify(m);

describe('detector frames', () => {
  it.each(MESSAGES.map((m) => [m.type, m] as const))('reads back a %s as it was written, one line each', (_type, m) => {
    const frame = encodeFrame(m);
    expect(frame.endsWith('\n')).toBe(true);
    expect(frame.indexOf('\n')).toBe(frame.length - 1);
    expect(parseFrame(frame.slice(0, -1), 'metrics')).toEqual({ ok: true, value: m });
  });

  it.each([
    ['not JSON', '{"format":1,', 'malformed', /not JSON/],
    ['another format', frameText({ ...base, format: 2, type: 'heartbeat' }), 'malformed', /format/],
    ['an unknown type', frameText({ ...base, type: 'hello' }), 'malformed', /type/],
    ['a bad node id', frameText({ ...base, type: 'heartbeat', from: { node: ' x', incarnation: 'i' } }), 'malformed', /from\.node/],
    ['a negative seq', frameText({ ...base, type: 'heartbeat', seq: -1 }), 'malformed', /seq/],
    ['an extra field', frameText({ ...base, type: 'heartbeat', lease: 9 }), 'malformed', /lease/],
    ['a string epoch', frameText({ ...base, type: 'grant', epoch: '3', leaseMs: 500, heartbeatIntervalMs: 100 }), 'malformed', /epoch/],
    ['a vote of no kind', frameText({ ...base, type: 'vote', target: a, vote: 'maybe' }), 'malformed', /vote/],
    ['another cluster', frameText({ ...base, cluster: 'logs', type: 'heartbeat' }), 'foreign-cluster', /"logs"/],
    [
      'an oversized frame',
      frameText({ ...base, type: 'ping-req', epoch: 1, target: a, address: 'x'.repeat(MAX_FRAME_BYTES) }),
      'too-large',
      /bytes, at most 4096/,
    ],
  ])('drops %s', (_what, text, cause, detail) => {
    const r = parseFrame(text, 'metrics');
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error.cause).toBe(cause);
      expect(r.error.detail).toMatch(detail);
    }
  });

  it('counts every drop by cause and reports only the first of each cause', () => {
    const first: string[] = [];
    const counted: string[] = [];
    const dropped = new DroppedFrames(
      (d, from) => first.push(`${d.cause} ${from ?? '?'} ${d.detail}`),
      (cause) => counted.push(cause),
    );
    dropped.drop({ cause: 'malformed', detail: 'one' }, 'x@1');
    dropped.drop({ cause: 'malformed', detail: 'two' }, 'x@1');
    dropped.drop({ cause: 'stale-epoch', detail: 'three' });
    dropped.drop({ cause: 'malformed', detail: 'four' });
    expect(first).toEqual(['malformed x@1 one', 'stale-epoch ? three']);
    expect(counted).toEqual(['malformed', 'malformed', 'stale-epoch', 'malformed']);
    expect(dropped.byCause.get('malformed')).toBe(3);
    expect(dropped.byCause.get('replayed')).toBe(0);
    expect(dropped.total).toBe(4);
  });
});
