// The log lines of the coordinator's lots of copies: a lot is said at once, or summed with the
// lots of its kind within the `LotLog`'s window into one line at its end.
import type { Lot } from '../lot-log.js';
import type { SayLine } from './step.js';

export interface LogLine {
  readonly fields: Record<string, unknown>;
  readonly text: string;
}

/** The `LotLog` kind of a line: lots of the same kind are summed. */
export function kindOf(line: SayLine): string {
  switch (line.what) {
    case 'stopped':
      return `shards.stopped ${line.why}`;
    case 'started':
      return `shards.started ${line.dataset}`;
    case 'restated':
      return `shards.restated ${line.dataset}`;
  }
}

/** The line that says `lot`, summed from `changes` changes of the map. */
export function lineOf(line: SayLine, lot: Lot, changes: number): LogLine {
  const summed = changes > 1 ? { changes } : {};
  switch (line.what) {
    case 'stopped':
      return {
        fields: { event: 'shards.stopped', copies: lot.count, sample: lot.sample, why: line.why, ...summed },
        text: `${copies(lot.count)} stopped: ${line.why}${inChanges(changes)}`,
      };
    case 'started':
      return {
        fields: { event: 'shards.started', dataset: line.dataset, copies: lot.count, sample: lot.sample, ...summed },
        text: `${copies(lot.count)} of ${line.dataset} started${inChanges(changes)}`,
      };
    case 'restated':
      return {
        fields: { event: 'shards.restated', dataset: line.dataset, copies: lot.count, sample: lot.sample, ...summed },
        text: `start of ${copies(lot.count)} already running under a new assignment: they keep ingesting and report their status again${inChanges(changes)}`,
      };
  }
}

/** "1 shard copy", "3 shard copies". */
const copies = (n: number) => `${n} shard cop${n === 1 ? 'y' : 'ies'}`;

/** " (in 3 changes of the map)" when a line sums several. */
const inChanges = (changes: number) => (changes > 1 ? ` (in ${changes} changes of the map within 10 s)` : '');
