// The handlers a node config's `serve` section names: one module per dataset, loaded with a dynamic
// `import()` before the node connects to anything, so that a missing file or a module without a
// handler stops the process at once with the key that names it (exit code 2), never after it joined.
import { stat } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import type { DatasetRef, NodeId } from '../core/ids.js';
import type { ShardRequestHandler } from '../serving/dataset-server.js';
import { NodeConfigError, type NodeConfig, type ServeConfig } from './node-config.js';

/** What a handler module's `createHandler` export is given. */
export interface ServeHandlerContext {
  /** The node the handler runs on. */
  readonly node: NodeId;
  readonly dataset: DatasetRef;
  readonly config: NodeConfig;
  /** The node's logger, a child for this dataset. */
  readonly log: Logger;
}

/** A `serve` entry with its handler, ready for `ShardherdNode.serve`. */
export interface LoadedServeHandler {
  readonly serve: ServeConfig;
  readonly handler: ShardRequestHandler;
}

/**
 * Loads every `serve` entry's module. A module provides its handler as, in this order of precedence:
 * a named `createHandler(context)` export (returns the handler, or a promise of it: for handlers
 * that need the node's id or set-up of their own), a named `handler` export, or the default export.
 * Throws a `NodeConfigError` naming `serve.<i>.handler` when the file does not exist, its import
 * throws, or it exports none of these as a function.
 */
export async function loadServeHandlers(config: NodeConfig, log: Logger, source = 'config'): Promise<LoadedServeHandler[]> {
  const loaded: LoadedServeHandler[] = [];
  for (const [i, serve] of config.serve.entries()) {
    const key = `serve.${i}.handler`;
    const isFile = await stat(serve.handler).then(
      (s) => s.isFile(),
      () => false,
    );
    if (!isFile) throw new NodeConfigError(key, `names no file: ${serve.handler}`, source);
    let module: Record<string, unknown>;
    try {
      module = (await import(pathToFileURL(serve.handler).href)) as Record<string, unknown>;
    } catch (e) {
      throw new NodeConfigError(key, `${serve.handler} could not be loaded: ${e instanceof Error ? e.message : String(e)}`, source);
    }
    let handler: unknown;
    if (typeof module.createHandler === 'function') {
      const context: ServeHandlerContext = { node: config.node, dataset: serve.dataset, config, log: log.child({ dataset: serve.dataset }) };
      try {
        handler = await (module.createHandler as (c: ServeHandlerContext) => unknown)(context);
      } catch (e) {
        throw new NodeConfigError(key, `${serve.handler}: createHandler failed: ${e instanceof Error ? e.message : String(e)}`, source);
      }
      if (typeof handler !== 'function')
        throw new NodeConfigError(key, `${serve.handler}: createHandler returned ${describe(handler)}, not a handler function`, source);
    } else {
      handler = typeof module.handler === 'function' ? module.handler : module.default;
      if (typeof handler !== 'function') {
        throw new NodeConfigError(key, `${serve.handler} exports no handler: a function as its default export, or named "handler" or "createHandler"`, source);
      }
    }
    loaded.push({ serve, handler: handler as ShardRequestHandler });
  }
  return loaded;
}

function describe(value: unknown): string {
  return value === null ? 'null' : typeof value;
}
