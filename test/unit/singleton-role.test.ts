// The flag that says whether a node's singleton still acts (docs/ARCHITECTURE.md §11.9): set at
// once by whatever decides the stop, read without waiting for the singleton's actor.
import { describe, expect, it } from 'vitest';
import { SingletonRole } from '../../src/actors/singleton-role.js';

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
});
