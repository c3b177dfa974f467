// Long pure work written once as steps (a generator that yields between them) and run either
// whole, as the core always runs, or with a pause between steps: a node decoding the whole map of
// 65 536 shards × 3 it joins with held its event loop for half a second in one task (issue 34).

/** Work in steps: it yields between them and returns its result. */
export type Steps<T> = Generator<void, T, void>;

/** Runs `steps` to their end at once. */
export function runWhole<T>(steps: Steps<T>): T {
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
  }
}

/** Runs `steps` with `pause()` awaited between them (the event loop's turn, on a real process). */
export async function runInSlices<T>(steps: Steps<T>, pause: () => Promise<void>): Promise<T> {
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
    await pause();
  }
}

/** Items of a long loop between two steps. */
export const ITEMS_PER_STEP = 1024;
