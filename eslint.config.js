// Lint rules that protect the design, not taste: src/core and the actors' steps must stay pure and
// deterministic, and each layer of src/ imports only its own and those below.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const IMPURE_GLOBALS = [
  ['setTimeout', 'timers'],
  ['setInterval', 'timers'],
  ['setImmediate', 'timers'],
  ['clearTimeout', 'timers'],
  ['clearInterval', 'timers'],
  ['clearImmediate', 'timers'],
  ['queueMicrotask', 'timers'],
  ['process', 'process.env and other process state'],
  ['performance', 'wall-clock time'],
  ['crypto', 'randomness'],
  ['fetch', 'I/O'],
  ['console', 'output'],
];

/** What a pure module may not touch, said in the words of `where` ("src/core", "an actor's step"). */
function impureGlobals(where) {
  return IMPURE_GLOBALS.map(([name, what]) => ({
    name,
    message: `${where} is pure: no ${what}. Take it as an input (Clock, Random, config) in the actor layer.`,
  }));
}

function impureSyntax(where) {
  return [
    { selector: "MemberExpression[object.name='Date'][property.name='now']", message: `${where} is pure: no Date.now. Take \`now\` as an input.` },
    // `new Date(ms)` formats an instant it was given; only the forms without one read the clock.
    { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: `${where} is pure: no wall-clock dates. Take \`now\` as an input.` },
    { selector: "CallExpression[callee.name='Date']", message: `${where} is pure: Date() is the wall-clock time. Take \`now\` as an input.` },
    {
      selector: "MemberExpression[object.name='Math'][property.name='random']",
      message: `${where} is pure: no Math.random. Take a seeded Random as an input.`,
    },
    { selector: "MemberExpression[object.name='process']", message: `${where} is pure: no process state (process.env is read only in src/cli).` },
  ];
}

/**
 * An actor's pure reducer (src/actors/reducer.ts): its step and the state and effects it is made of.
 * The shell beside them performs the effects.
 */
const ACTOR_STEP_FILES = [
  'src/actors/*/step.ts',
  'src/actors/*/*-step.ts',
  'src/actors/*/state.ts',
  'src/actors/*/effects.ts',
  // The pure helpers of a step: the singleton's bookkeeping, the coordinator's log lines and messages.
  'src/actors/singleton/bookkeeping.ts',
  'src/actors/coordinator/lines.ts',
  'src/actors/coordinator/messages.ts',
];

/**
 * The layers of src/, lowest first (docs/ARCHITECTURE.md §3): a folder may import its own layer and
 * those below, never one above. The core (layer 0) has its own stricter rules above.
 */
const LAYERS = [
  ['core'],
  // The ports and their adapters: the bus, membership, failure detector, MetaStore, sources and sinks.
  ['cluster', 'store', 'ingest'],
  // What travels between nodes and clients: the wire formats, routed requests, followed maps.
  ['protocol'],
  // A node's runtime (actors, its servers of routed requests) and the client that is not a member.
  ['actors', 'serving', 'client'],
  // What runs a node or a cluster and looks at it: metrics, the embedded cluster, HTTP, processes, the simulator.
  ['metrics', 'embedded', 'http', 'node', 'sim'],
  // Entry points.
  ['cli', 'entries'],
];

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
      'no-restricted-globals': ['error', ...impureGlobals('src/core')],
      'no-restricted-syntax': ['error', ...impureSyntax('src/core')],
      'no-restricted-imports': coreImports('^\\.\\./'),
    },
  },
  // One level down (src/core/shard-manager, src/core/placement), `../` is still the core: `../../` is not.
  { files: ['src/core/*/*.ts'], rules: { 'no-restricted-imports': coreImports('^\\.\\./\\.\\./') } },
  { files: ['src/core/*/*/**/*.ts'], rules: { 'no-restricted-imports': coreImports('^(\\.\\./){3}') } },
  ...layerRules(),
  // The runtime defers work to a coming turn of the event loop only through `nextTurn`
  // (src/cluster/turns.ts), which counts it: the simulator knows a cluster is quiet when nothing
  // counted is left, and an uncounted `setImmediate` would let it move the clock under running work.
  {
    files: ['src/{actors,serving,cluster,store,ingest,protocol,embedded}/**/*.ts'],
    ignores: ['src/cluster/turns.ts'],
    rules: {
      'no-restricted-globals': [
        'error',
        {
          name: 'setImmediate',
          message: 'defer to a coming turn with nextTurn or aTurn (src/cluster/turns.ts): the simulator counts those, not setImmediate.',
        },
      ],
    },
  },
  // A unit test does not sleep: its cluster runs on simulated time, moved by its driver. Tests on the
  // wall clock live in test/live, test/integration and test/browser (docs/DEVELOPMENT.md).
  {
    files: ['test/unit/**/*.ts'],
    rules: {
      'no-restricted-globals': [
        'error',
        ...['setTimeout', 'setInterval'].map((name) => ({
          name,
          message: 'a unit test does not wait on the wall clock: move the clock of a simulated cluster (SimDriver), or put the test in test/live.',
        })),
      ],
      // The unit files share their worker's modules (vitest.config.ts: isolate false): what one
      // file mocks or stubs, the files after it in that worker would see.
      'no-restricted-properties': [
        'error',
        ...['mock', 'doMock', 'stubGlobal', 'stubEnv'].map((property) => ({
          object: 'vi',
          property,
          message: 'unit test files share modules and globals (isolate: false): pass a fake in instead of mocking a module or stubbing a global.',
        })),
      ],
    },
  },
  // No code of the package reaches into a library's internals: nothing swapped in Node's module cache.
  {
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-properties': [
        'error',
        { object: 'require', property: 'cache', message: "do not replace or drop modules in Node's module cache: use the library's own options." },
      ],
    },
  },
  {
    files: ACTOR_STEP_FILES,
    rules: {
      'no-restricted-globals': ['error', ...impureGlobals("an actor's step")],
      'no-restricted-syntax': ['error', ...impureSyntax("an actor's step")],
      // Types from anywhere (the shell's ports, messages); values only from the core, the protocol
      // and the step's own pure siblings.
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['node:*', 'fs', 'path', 'os', 'net', 'child_process', 'timers', 'crypto'], message: "an actor's step does no I/O: its shell does." },
            {
              group: ['nact', 'kafkajs', 'cassandra-driver', 'pino', 'fastify', '@fastify/*', 'prom-client', 'ws'],
              message: "an actor's step knows no runtime library: its shell does.",
            },
            {
              regex: '^\\.\\./(?!\\.\\./(core|protocol)/)',
              allowTypeImports: true,
              message: "an actor's step uses values of the core, the protocol and its own folder's pure modules only: the rest is its shell's.",
            },
          ],
        },
      ],
    },
  },
);

/** A rule per folder that refuses imports of any folder of a higher layer, and of the runtime from the client. */
function layerRules() {
  return LAYERS.slice(1).flatMap((folders, i) => {
    const above = LAYERS.slice(i + 2).flat();
    return folders.map((folder) => {
      // The client is the runtime's peer, not its user: it follows the maps over the bus itself.
      const forbidden = folder === 'client' ? [...above, 'actors', 'serving'] : above;
      return forbidden.length === 0
        ? {}
        : {
            files: [`src/${folder}/**/*.ts`],
            rules: {
              'no-restricted-imports': [
                'error',
                {
                  patterns: [
                    {
                      regex: `^(\\.\\./)+(${forbidden.join('|')})(/|$)`,
                      message: `src/${folder} may not import ${forbidden.join(', ')}: they are above it (docs/ARCHITECTURE.md §3).`,
                    },
                  ],
                },
              ],
            },
          };
    });
  });
}

/**
 * What src/core may not import: Node's I/O, the runtime's libraries, and any file outside
 * src/core (`leavesCore`: a relative path that climbs out of it from the file's depth). Each
 * depth needs its own pattern, as a file's place decides where `../` leads.
 */
function coreImports(leavesCore) {
  return [
    'error',
    {
      patterns: [
        { group: ['node:*', 'fs', 'path', 'os', 'net', 'child_process', 'timers', 'crypto'], message: 'src/core does no I/O: no node: modules.' },
        {
          group: ['nact', 'kafkajs', 'cassandra-driver', 'pino', 'fastify', '@fastify/*', 'prom-client', 'ws'],
          message: 'src/core knows no runtime library: the actor layer adapts.',
        },
        { regex: leavesCore, message: 'src/core depends on nothing outside src/core.' },
      ],
    },
  ];
}
