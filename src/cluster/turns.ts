// The turns of the event loop that the process's own code asks for, counted. Work deferred to a
// coming turn (`setImmediate`) is invisible from outside until it runs; a simulator that must know
// when an in-process cluster has nothing left to do without its clock moving (no guess at "a few
// quiet turns") reads how many of these are still to run. Every deferral of a coming turn in the
// runtime goes through `nextTurn`.

let scheduled = 0;

/** Runs `fn` in a coming turn of the event loop (`setImmediate`), counted until it starts. */
export function nextTurn(fn: () => void): void {
  scheduled += 1;
  setImmediate(() => {
    scheduled -= 1;
    fn();
  });
}

/** Resolves in a coming turn of the event loop, counted as `nextTurn` counts. */
export function aTurn(): Promise<void> {
  return new Promise((resolve) => nextTurn(resolve));
}

/** Turns asked for by `nextTurn` in this thread that have not started yet. */
export function turnsScheduled(): number {
  return scheduled;
}
