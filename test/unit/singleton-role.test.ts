// The flag that says whether a node's singleton still acts (docs/ARCHITECTURE.md §11.9): set at
// once by whatever decides the stop, read without waiting for the singleton's actor.
import { describe, expect, it } from 'vitest';
import { SingletonRole } from '../../src/actors/singleton-role.js';
import type { ShardManagerState } from '../../src/core/shard-manager/step.js';

describe('SingletonRole', () => {
  it('acts from its begin until its stop; the first reason stays', () => {
    const role = new SingletonRole();
    expect(role.acting(3)).toBe(false);
    expect(role.actingEpoch).toBeUndefined();
    role.begin(3);
    expect(role.acting(3)).toBe(true);
    expect(role.actingEpoch).toBe(3);
    expect(role.stop(3, 'the singleton lease ran out')).toBe(true);
    expect(role.stop(3, 'told to')).toBe(false);
    expect(role.acting(3)).toBe(false);
    expect(role.actingEpoch).toBeUndefined();
    expect(role.stoppedBecause(3)).toBe('the singleton lease ran out');
  });

  it('lets a newer singleton of the node act, and only it: an older one may not, and cannot stop it', () => {
    const role = new SingletonRole();
    role.begin(3);
    role.begin(5);
    expect(role.acting(3)).toBe(false);
    expect(role.stop(3, 'late')).toBe(false);
    expect(role.acting(5)).toBe(true);
    expect(role.stoppedBecause(3)).toBeUndefined();
  });

  it('shows the state the acting singleton last stored, and none once it stopped or a newer one acts', () => {
    const role = new SingletonRole();
    const stored = { epoch: 3 } as unknown as ShardManagerState;
    role.begin(3);
    expect(role.shownState()).toBeUndefined(); // not recovered yet
    role.show(3, stored);
    expect(role.shownState()).toBe(stored);
    role.begin(5);
    expect(role.shownState()).toBeUndefined(); // the older singleton's state is not the newer one's
    role.show(5, stored);
    role.stop(5, 'the singleton lease ran out');
    expect(role.shownState()).toBeUndefined();
  });
});
