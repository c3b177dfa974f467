// The Node versions the project tests besides the one `npm test` runs on (Node 24, the dev
// dependency `node`): the maintenance LTS and the current line, from the npm registry's `node`
// package (the same one as the dev dependency), each pinned.
export const OTHER_NODES = ['22.23.3', '26.9.0'] as const;

/** What each other Node runs: the unit and simulator projects and the real-service smoke project. */
export const MATRIX_PROJECTS = ['unit', 'sim', 'smoke'] as const;

/**
 * The simulator's random seeds on each other Node: a fifth of `npm test`'s (which runs them all on
 * Node 24), enough to show the same cluster behaves the same on another runtime. Every regression
 * seed still runs. The simulator's seeds were most of each other Node's time (370 of 425 s).
 */
export const MATRIX_SIM_SEEDS = { SHARDHERD_SIM_SEEDS: '200', SHARDHERD_SIM_DETECTOR_SEEDS: '200', SHARDHERD_SIM_WORLD_SEEDS: '40' } as const;
