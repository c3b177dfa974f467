// Starts a worker thread on a module of this package, from the compiled package or its sources.
import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * A worker running the module `name` (without extension) next to `from` (the caller's
 * `import.meta.url`): the compiled .js in dist; from the .ts sources (tsx, vitest) a worker does
 * not inherit the TypeScript loader, so a one-line bootstrap registers tsx first.
 */
export function startModuleWorker(from: string, name: string, options: WorkerOptions): Worker {
  if (!from.endsWith('.ts')) return new Worker(new URL(`./${name}.js`, from), options);
  const source = JSON.stringify(new URL(`./${name}.ts`, from).href);
  return new Worker(`import('tsx/esm/api').then(({ register }) => { register(); return import(${source}); });`, { ...options, eval: true });
}
