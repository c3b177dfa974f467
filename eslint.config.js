// Lint rules that protect the design, not taste: src/core must stay pure and deterministic.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const impureGlobals = [
  ['setTimeout', 'timers'], ['setInterval', 'timers'], ['setImmediate', 'timers'],
  ['clearTimeout', 'timers'], ['clearInterval', 'timers'], ['clearImmediate', 'timers'],
  ['queueMicrotask', 'timers'], ['process', 'process.env and other process state'],
  ['performance', 'wall-clock time'], ['crypto', 'randomness'], ['fetch', 'I/O'], ['console', 'output'],
].map(([name, what]) => ({
  name,
  message: `src/core is pure: no ${what}. Take it as an input (Clock, Random, config) in the actor layer.`,
}));

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.cache/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['src/core/**/*.ts'],
    rules: {
      'no-restricted-globals': ['error', ...impureGlobals],
      'no-restricted-syntax': [
        'error',
        { selector: "MemberExpression[object.name='Date'][property.name='now']", message: 'src/core is pure: no Date.now. Take `now` as an input.' },
        // `new Date(ms)` formats an instant the core was given; only the forms without one read the clock.
        { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: 'src/core is pure: no wall-clock dates. Take `now` as an input.' },
        { selector: "CallExpression[callee.name='Date']", message: 'src/core is pure: Date() is the wall-clock time. Take `now` as an input.' },
        { selector: "MemberExpression[object.name='Math'][property.name='random']", message: 'src/core is pure: no Math.random. Take a seeded Random as an input.' },
        { selector: "MemberExpression[object.name='process']", message: 'src/core is pure: no process state (process.env is read only in src/cli).' },
      ],
      'no-restricted-imports': coreImports('^\\.\\./'),
    },
  },
  // One level down (src/core/shard-manager, src/core/placement), `../` is still the core: `../../` is not.
  { files: ['src/core/*/*.ts'], rules: { 'no-restricted-imports': coreImports('^\\.\\./\\.\\./') } },
  { files: ['src/core/*/*/**/*.ts'], rules: { 'no-restricted-imports': coreImports('^(\\.\\./){3}') } },
);

/**
 * What src/core may not import: Node's I/O, the runtime's libraries, and any file outside
 * src/core (`leavesCore`: a relative path that climbs out of it from the file's depth). Each
 * depth needs its own pattern, as a file's place decides where `../` leads.
 */
function coreImports(leavesCore) {
  return [
    'error',
    { patterns: [
      { group: ['node:*', 'fs', 'path', 'os', 'net', 'child_process', 'timers', 'crypto'], message: 'src/core does no I/O: no node: modules.' },
      { group: ['nact', 'kafkajs', 'cassandra-driver', 'pino', 'fastify', '@fastify/*', 'prom-client', 'ws'], message: 'src/core knows no runtime library: the actor layer adapts.' },
      { regex: leavesCore, message: 'src/core depends on nothing outside src/core.' },
    ] },
  ];
}
