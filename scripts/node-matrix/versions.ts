// The Node versions the project tests besides the one `npm test` runs on (Node 24, the dev
// dependency `node`): the maintenance LTS and the current line, from the npm registry's `node`
// package (the same one as the dev dependency), each pinned.
export const OTHER_NODES = ['22.23.3', '26.9.0'] as const;

/** What each other Node runs: the unit and simulator projects and the real-service smoke project. */
export const MATRIX_PROJECTS = ['unit', 'sim', 'smoke'] as const;
