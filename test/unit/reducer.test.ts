// The loop every actor's shell runs (src/actors/reducer.ts): effects are performed in the order the
// step gave them, a call's answer is stepped before the next effect (as the code after an `await`
// ran before the rest of a handler), and nothing more is performed once the actor may not act.
import { describe, expect, it } from 'vitest';
import { type Reducer, stepAndPerform } from '../../src/actors/reducer.js';

type Msg = { readonly type: 'Go'; readonly items: readonly string[] } | { readonly type: 'Answer'; readonly of: string };
type Effect = { readonly type: 'Say'; readonly text: string } | { readonly type: 'Call'; readonly of: string };
interface State {
  readonly said: number;
  readonly stopped: boolean;
}

const reducer: Reducer<State, Msg, Effect> = (state, msg, now) => {
  if (msg.type === 'Go')
    return { state, effects: msg.items.map((i) => (i.startsWith('call:') ? { type: 'Call', of: i.slice(5) } : { type: 'Say', text: `${i}@${now}` })) };
  return { state: { ...state, stopped: msg.of === 'stop' }, effects: [{ type: 'Say', text: `answer ${msg.of}` }] };
};

async function run(items: readonly string[]): Promise<{ log: string[]; state: State }> {
  const log: string[] = [];
  const state = await stepAndPerform<State, Msg, Effect>(
    { said: 0, stopped: false },
    { type: 'Go', items },
    reducer,
    async (e, s) => {
      if (e.type === 'Say') {
        log.push(e.text);
        return undefined;
      }
      await Promise.resolve();
      log.push(`call ${e.of} (stopped: ${s.stopped})`);
      return { type: 'Answer', of: e.of };
    },
    () => 7,
    (s) => !s.stopped,
  );
  return { log, state };
}

describe('stepAndPerform', () => {
  it('performs effects in order, stepping a call’s answer before the next effect', async () => {
    const { log } = await run(['a', 'call:x', 'b']);
    expect(log).toEqual(['a@7', 'call x (stopped: false)', 'answer x', 'b@7']);
  });

  it('performs nothing more once the state says the actor may not act', async () => {
    const { log, state } = await run(['a', 'call:stop', 'b', 'call:y']);
    expect(log).toEqual(['a@7', 'call stop (stopped: false)']);
    expect(state.stopped).toBe(true);
  });
});
