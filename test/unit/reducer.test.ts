// The loop every actor's shell runs (src/actors/reducer.ts): effects are performed in the order the
// step gave them, a call's answer is stepped before the next effect (as the code after an `await`
// ran before the rest of a handler), and nothing more is performed once the actor may not act.
import { describe, expect, it } from 'vitest';
import { type Reducer, stepAndPerform, stepNow } from '../../src/actors/reducer.js';

type Msg = { readonly type: 'Go'; readonly items: readonly string[] } | { readonly type: 'Answer'; readonly of: string };
type Effect = { readonly type: 'Say'; readonly text: string } | { readonly type: 'Call'; readonly of: string };
interface State {
  readonly said: number;
  readonly stopped: boolean;
}

const reducer: Reducer<State, Msg, Effect> = (state, msg, now) => {
  if (msg.type === 'Go')
    return { state, effects: msg.items.map((i) => (i.startsWith('call:') ? { type: 'Call', of: i.slice(5) } : { type: 'Say', text: `${i}@${now}` })) };
  return { state: { said: state.said + 1, stopped: msg.of === 'stop' }, effects: [{ type: 'Say', text: `answer ${msg.of}` }] };
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

  it('runs effects that do not return a promise at once, in one piece: nothing else runs between them', () => {
    const log: string[] = [];
    const box = { state: { said: 0, stopped: false } };
    const pending = stepNow<State, Msg, Effect>(
      box,
      { type: 'Go', items: ['a', 'call:x', 'b'] },
      reducer,
      (e) => {
        log.push(e.type === 'Say' ? e.text : `call ${e.of}`);
        return e.type === 'Call' ? { type: 'Answer', of: e.of } : undefined;
      },
      () => 3,
    );
    expect(pending).toBeUndefined();
    expect(log).toEqual(['a@3', 'call x', 'answer x', 'b@3']);
  });

  it('keeps the state in its box, so a step made while an effect is awaited is not lost', async () => {
    const box = { state: { said: 0, stopped: false } };
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const pending = stepNow<State, Msg, Effect>(
      box,
      { type: 'Go', items: ['call:x'] },
      reducer,
      async (e) => {
        if (e.type === 'Call') await held;
        return e.type === 'Call' ? { type: 'Answer', of: e.of } : undefined;
      },
      () => 0,
    );
    // Meanwhile a synchronous step changes the state: the awaited effect's answer builds on it.
    box.state = { ...box.state, said: 10 };
    release();
    await pending;
    expect(box.state.said).toBe(11);
  });
});
