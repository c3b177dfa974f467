// An actor's logic as a pure reducer, the core's own pattern (`decide(state, input, now) →
// {state, effects}`), and the one loop that runs it inside an actor. The reducer decides; the
// actor's shell performs the effects (store calls, bus records, timers, logs) in the order given.

/** What one step decided: the next state and the effects to perform, in order. */
export interface Stepped<S, E> {
  readonly state: S;
  readonly effects: readonly E[];
}

/** A pure step: the same state, message and time always give the same result, and it performs nothing. */
export type Reducer<S, M, E> = (state: S, msg: M, now: number) => Stepped<S, E>;

/**
 * Performs one effect, given the state as it is then. It may answer with a message, the result of a
 * call the effect made (a store read, a source's validation, a decision of the core): that message
 * is stepped at once, before the effects after it, as the code after an `await` ran before the rest
 * of an async handler.
 */
export type Performer<S, M, E> = (effect: E, state: S) => M | undefined | Promise<M | undefined>;

/**
 * Where an actor's state lives while its effects are performed. An actor that is also stepped by
 * synchronous calls (a copy's status, a report) while one of its effects is awaited keeps its state
 * here, so those steps build on each other rather than on a state held across the await.
 */
export interface Box<S> {
  state: S;
}

/**
 * Steps `msg` and performs its effects in order; an effect's answer is stepped (and its effects
 * performed) before the next effect, depth first. Only an effect whose performance is a promise is
 * waited for: effects that run synchronously run at once and in one piece, as the handler they
 * replace ran them (each `await` is a turn of the microtask queue in which other work runs).
 * Undefined when all of it ran synchronously, else a promise of the rest. `stillActs` is asked before
 * every effect: once it says no (a fenced singleton, a stopped actor), nothing more is performed.
 */
export function stepNow<S, M, E>(
  box: Box<S>,
  msg: M,
  reducer: Reducer<S, M, E>,
  perform: Performer<S, M, E>,
  now: () => number,
  stillActs: (state: S) => boolean = () => true,
): Promise<void> | undefined {
  const stepped = reducer(box.state, msg, now());
  box.state = stepped.state;
  return performFrom(box, stepped.effects, 0, { reducer, perform, now, stillActs });
}

interface Loop<S, M, E> {
  readonly reducer: Reducer<S, M, E>;
  readonly perform: Performer<S, M, E>;
  readonly now: () => number;
  readonly stillActs: (state: S) => boolean;
}

function performFrom<S, M, E>(box: Box<S>, effects: readonly E[], from: number, loop: Loop<S, M, E>): Promise<void> | undefined {
  for (let i = from; i < effects.length; i++) {
    if (!loop.stillActs(box.state)) return undefined;
    const answer = loop.perform(effects[i]!, box.state);
    const rest = () => performFrom(box, effects, i + 1, loop);
    if (answer instanceof Promise) {
      return answer.then(async (m) => {
        if (m !== undefined) await stepNow(box, m, loop.reducer, loop.perform, loop.now, loop.stillActs);
        await rest();
      });
    }
    if (answer !== undefined) {
      const answered = stepNow(box, answer, loop.reducer, loop.perform, loop.now, loop.stillActs);
      if (answered) return answered.then(rest);
    }
  }
  return undefined;
}

/** `stepNow` for an actor whose state is its mailbox's: the state after `msg` and all it led to. */
export async function stepAndPerform<S, M, E>(
  state: S,
  msg: M,
  reducer: Reducer<S, M, E>,
  perform: Performer<S, M, E>,
  now: () => number,
  stillActs: (state: S) => boolean = () => true,
): Promise<S> {
  const box = { state };
  await stepNow(box, msg, reducer, perform, now, stillActs);
  return box.state;
}

/** A step that changes nothing and performs nothing. */
export const unchanged = <S, E>(state: S): Stepped<S, E> => ({ state, effects: [] });
