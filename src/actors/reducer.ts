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
 * Performs one effect. It may answer with a message, the result of a call the effect made (a store
 * read, a source's validation, a decision of the core): that message is stepped at once, before the
 * effects after it, as the code after an `await` ran before the rest of an async handler.
 */
export type Performer<S, M, E> = (effect: E, state: S) => M | undefined | Promise<M | undefined>;

/**
 * Steps `msg` and performs its effects in order; an effect's answer is stepped (and its effects
 * performed) before the next effect, depth first. `stillActs` is asked before every effect: once it
 * says no (a fenced singleton, a stopped actor), nothing more is performed or stepped.
 */
export async function stepAndPerform<S, M, E>(
  state: S,
  msg: M,
  reducer: Reducer<S, M, E>,
  perform: Performer<S, M, E>,
  now: () => number,
  stillActs: (state: S) => boolean = () => true,
): Promise<S> {
  const stepped = reducer(state, msg, now());
  state = stepped.state;
  for (const effect of stepped.effects) {
    if (!stillActs(state)) return state;
    const answer = await perform(effect, state);
    if (answer !== undefined) state = await stepAndPerform(state, answer, reducer, perform, now, stillActs);
  }
  return state;
}

/** A step that changes nothing and performs nothing. */
export const unchanged = <S, E>(state: S): Stepped<S, E> => ({ state, effects: [] });
