// What a probe's outcome is worth as a vote (docs/ARCHITECTURE.md §11.5), for the singleton's own
// probes and a helper's alike: a slow observer does not vote (Orleans); a refusal is a failure that
// shortens the silence needed, never proof that the process is gone (a middlebox answers the same).
import type { Vote } from './messages.js';
import { stallThresholdMs, type FailureDetectorSettings } from './settings.js';

/** How a probe ended. */
export type ProbeOutcome =
  /** The target acked. */
  | { readonly kind: 'acked' }
  /** The connection was refused or closed by the other side: nothing listens for that incarnation. */
  | { readonly kind: 'refused' }
  /** The probe's timer ran out, firing `latenessMs` after it was due. */
  | { readonly kind: 'timed-out'; readonly latenessMs: number };

/**
 * The vote a probe's outcome makes. A timeout counts as `silent` only if the observer's own timer
 * fired on time: one that ran late means the observer did not run meanwhile (a pause, a starved
 * event loop), and the ack may be waiting unread — it votes `unsure`.
 */
export function probeVote(outcome: ProbeOutcome, settings: Pick<FailureDetectorSettings, 'heartbeatIntervalMs'>): Vote {
  switch (outcome.kind) {
    case 'acked':
      return 'alive';
    case 'refused':
      return 'refused';
    case 'timed-out':
      return outcome.latenessMs > stallThresholdMs(settings) ? 'unsure' : 'silent';
  }
}
