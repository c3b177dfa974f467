// The thin layer over nact that every shardherd actor is spawned through. nact drops messages to
// stopped actors silently, has no deathwatch, and logs crashes with console.log; this layer counts
// and logs dead letters, lets one actor watch another's stop, reports every crash through pino,
// and counts messages in flight, and the actors that have a message to run, so a simulation knows
// exactly when the cluster is quiet.
import nact from 'nact';
import type { Logger } from 'pino';

/** An actor whose handler is running: the message it handles, for how long. */
export interface BusyActor {
  readonly actor: string;
  readonly message: string;
  readonly forMs: number;
}

/** A reference to an actor that accepts messages of type `M`. */
export type ActorRef<M> = nact.Ref<M>;

export interface ActorContext<M> {
  readonly self: ActorRef<M>;
  readonly name: string;
}

export type Handler<S, M> = (state: S, msg: M, ctx: ActorContext<M>) => S | Promise<S>;

export interface SpawnOptions<S> {
  readonly initialState: S;
  /** Runs once the actor has stopped (after its children), with its last state. */
  readonly afterStop?: (state: S) => void | Promise<void>;
  /**
   * What a crash (a handler that throws) does after it is logged: `resume` keeps the actor and its
   * state and goes on with the next message; `stop` stops it (watchers are told). Default `stop`.
   */
  readonly onCrash?: 'resume' | 'stop';
}

interface Cell {
  path: string;
  /** Messages sent and not yet handled (queued, or the one running). */
  pending: number;
  /** A handler is running (perhaps awaiting something): the messages behind it wait for it. */
  running: boolean;
  /** While a handler runs: its message's type and when it started (a handler that never ends holds the mailbox). */
  handling: { readonly message: string; readonly since: number } | undefined;
  /** Stopped by nact and its `afterStop` still to run (nact runs it in a coming turn). */
  stopping: boolean;
  alive: boolean;
  watchers: Set<() => void>;
  readonly children: Set<ActorRef<unknown>>;
  readonly parent: ActorRef<unknown> | undefined;
}

/**
 * One actor system. Names are always given (nact would otherwise draw random names), so paths, logs
 * and simulations are reproducible.
 */
export class ActorRuntime {
  readonly system: nact.ActorSystemRef;
  private readonly cells = new Map<ActorRef<unknown>, Cell>();
  private inFlightCount = 0;
  /** Cells with a message and no handler running: nact will start one in a coming turn. */
  private readyCount = 0;
  private stoppingCount = 0;
  private deadLetterCount = 0;
  private crashCount = 0;
  /** Set by `shutdown`: mailboxes dropped then are expected (the process stops), not a warning. */
  private shuttingDown = false;

  constructor(
    readonly name: string,
    readonly log: Logger,
    /** The time handlers are timed by (`busy`); the node's own clock. */
    private readonly now: () => number = () => 0,
  ) {
    // nact reads the name from an object (its typings say a string, which it would ignore).
    this.system = nact.start({ name } as never);
  }

  /** Messages sent and not yet handled, across all actors. Zero when the system is idle. */
  get inFlight(): number {
    return this.inFlightCount;
  }

  /**
   * What this system will do in a coming turn of the event loop with nothing else happening: actors
   * with a message to start (none running), and stopped actors whose `afterStop` is still to run.
   * Zero: every message in flight waits for something outside the system (a timer, a port, another
   * system), which is how a simulation knows the cluster is quiet without guessing.
   */
  get ready(): number {
    return this.readyCount + this.stoppingCount;
  }

  /**
   * The actors whose handler has been running for at least `atLeastMs`, the longest first: the
   * messages behind it wait, so an answer the node needs from it (its /status) waits too. A handler
   * awaiting a port call that never ends shows here with the message it handles.
   */
  busy(atLeastMs: number): BusyActor[] {
    const now = this.now();
    const busy: BusyActor[] = [];
    for (const cell of this.cells.values()) {
      if (cell.alive && cell.handling && now - cell.handling.since >= atLeastMs) {
        busy.push({ actor: cell.path, message: cell.handling.message, forMs: now - cell.handling.since });
      }
    }
    return busy.sort((a, b) => b.forMs - a.forMs);
  }

  /** Messages sent to actors that had stopped (each one was also logged). */
  get deadLetters(): number {
    return this.deadLetterCount;
  }

  /** Handler crashes (each one was also logged). */
  get crashes(): number {
    return this.crashCount;
  }

  spawn<S, M>(parent: ActorRef<unknown> | nact.ActorSystemRef, name: string, handler: Handler<S, M>, options: SpawnOptions<S>): ActorRef<M> {
    const wrapped = async (state: S, msg: M, nctx: nact.ActorContext<M, nact.Ref<unknown>>): Promise<S> => {
      this.update(this.cells.get(nctx.self), (c) => {
        c.running = true;
        c.handling = { message: describe(msg), since: this.now() };
      });
      try {
        return await handler(state, msg, { self: nctx.self, name: nctx.name });
      } finally {
        this.finishOne(nctx.self);
      }
    };
    const cellRef: { ref?: ActorRef<M> } = {};
    const self = nact.spawn(parent as nact.Ref<unknown>, wrapped as never, name, {
      initialState: options.initialState,
      onCrash: (msg: unknown, error: unknown, ctx: nact.SupervisionContext<M, nact.Ref<unknown>>) => {
        this.crashCount += 1;
        this.log.error({ err: error, actor: this.pathOf(cellRef.ref), message: describe(msg) }, 'actor crashed');
        if (options.onCrash === 'resume') return ctx.resume;
        this.markStopping(cellRef.ref);
        return ctx.stop;
      },
      afterStop: async (state: S) => {
        const cell = cellRef.ref ? this.cells.get(cellRef.ref) : undefined;
        if (cell) {
          this.update(cell, (c) => (c.alive = false));
          if (cell.stopping) {
            cell.stopping = false;
            this.stoppingCount -= 1;
          }
          // Messages still queued (or scheduled) when the actor stopped will never run.
          if (cell.pending > 0) {
            this.deadLetterCount += cell.pending;
            this.inFlightCount -= cell.pending;
            this.log[this.shuttingDown ? 'debug' : 'warn']({ actor: cell.path, dropped: cell.pending }, 'actor stopped with messages in its mailbox: dropped');
            cell.pending = 0;
          }
          this.cells.delete(cellRef.ref!);
          if (cell.parent) this.cells.get(cell.parent)?.children.delete(cellRef.ref!);
          for (const w of cell.watchers) w();
        }
        await options.afterStop?.(state);
      },
    } as never) as ActorRef<M>;
    cellRef.ref = self;
    const parentCell = this.cells.get(parent as ActorRef<unknown>);
    parentCell?.children.add(self as ActorRef<unknown>);
    this.cells.set(self as ActorRef<unknown>, {
      path: pathString(self),
      pending: 0,
      running: false,
      handling: undefined,
      stopping: false,
      alive: true,
      watchers: new Set(),
      children: new Set(),
      parent: parentCell ? (parent as ActorRef<unknown>) : undefined,
    });
    return self;
  }

  /**
   * Work that is not a message but runs like one (a shard copy's step): counted in flight until the
   * returned function is called, so whoever waits for nothing in flight (a benchmark's quiet
   * cluster) waits for it to end.
   */
  beginWork(): () => void {
    this.inFlightCount += 1;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.inFlightCount -= 1;
    };
  }

  /**
   * Sends a message. A message to a stopped actor is not delivered: it is logged and counted as a
   * dead letter, and `false` is returned.
   */
  send<M>(ref: ActorRef<M>, msg: M): boolean {
    const cell = this.cells.get(ref as ActorRef<unknown>);
    if (!cell || !cell.alive) {
      this.deadLetterCount += 1;
      this.log.warn({ actor: pathString(ref), message: describe(msg) }, 'message to a stopped actor dropped');
      return false;
    }
    this.update(cell, (c) => (c.pending += 1));
    this.inFlightCount += 1;
    nact.dispatch(ref, msg);
    return true;
  }

  /**
   * Sends a question answered through a reply callback, and answers `ifStopped` instead if the
   * actor is stopped or stops before it replied (its mailbox dropped with the question in it): a
   * question to an actor that is stopping is answered, never left waiting for ever.
   */
  ask<M, T>(ref: ActorRef<M>, question: (reply: (answer: T) => void) => NoInfer<M>, reply: (answer: T) => void, ifStopped: NoInfer<T>): void {
    let answered = false;
    let unwatch = () => {};
    const once = (answer: T) => {
      if (answered) return;
      answered = true;
      unwatch();
      reply(answer);
    };
    unwatch = this.watch(ref, () => once(ifStopped));
    if (!answered && !this.send(ref, question(once))) once(ifStopped);
  }

  /**
   * Stops an actor and its children (children first). Messages already queued are dropped (and
   * counted). nact's own stop does not reach children (it hands them to a function that resolves
   * references only), so the children are stopped here one by one.
   */
  stop(ref: ActorRef<unknown>): void {
    const cell = this.cells.get(ref);
    if (!cell?.alive) return;
    for (const child of [...cell.children]) this.stop(child);
    this.markStopping(ref);
    nact.stop(ref);
  }

  isAlive(ref: ActorRef<unknown>): boolean {
    return this.cells.get(ref)?.alive ?? false;
  }

  /**
   * Deathwatch: `onStop` runs once when `ref` stops (at once if it already has). Returns a function
   * that cancels the watch.
   */
  watch(ref: ActorRef<unknown>, onStop: () => void): () => void {
    const cell = this.cells.get(ref);
    if (!cell?.alive) {
      onStop();
      return () => {};
    }
    cell.watchers.add(onStop);
    return () => cell.watchers.delete(onStop);
  }

  /** Stops every actor of this system (each one's `afterStop` runs), then the system. */
  shutdown(): void {
    this.shuttingDown = true;
    for (const [ref, cell] of [...this.cells]) if (!cell.parent) this.stop(ref);
    nact.stop(this.system);
  }

  private finishOne(ref: ActorRef<unknown>): void {
    const cell = this.cells.get(ref);
    if (!cell) return;
    this.update(cell, (c) => {
      c.running = false;
      c.handling = undefined;
      if (c.pending > 0) {
        c.pending -= 1;
        this.inFlightCount -= 1;
      }
    });
  }

  /** Changes a cell and keeps `readyCount` (cells with a message and no handler running) in step. */
  private update(cell: Cell | undefined, change: (cell: Cell) => void): void {
    if (!cell) return;
    const wasReady = isReady(cell);
    change(cell);
    this.readyCount += Number(isReady(cell)) - Number(wasReady);
  }

  /** nact will run the actor's `afterStop` in a coming turn: counted until it has. */
  private markStopping(ref: ActorRef<unknown> | undefined): void {
    const cell = ref ? this.cells.get(ref) : undefined;
    if (!cell || cell.stopping) return;
    cell.stopping = true;
    this.stoppingCount += 1;
  }

  private pathOf(ref: ActorRef<unknown> | undefined): string {
    return ref ? (this.cells.get(ref)?.path ?? pathString(ref)) : '?';
  }
}

const isReady = (cell: Cell): boolean => cell.alive && !cell.running && cell.pending > 0;

function pathString(ref: ActorRef<unknown>): string {
  const p = (ref as unknown as { path?: { toString(): string } }).path;
  return p ? p.toString() : String((ref as unknown as { name?: string }).name ?? '?');
}

/** A message's type for logs, never its whole payload. */
export function describe(msg: unknown): string {
  if (msg && typeof msg === 'object' && 'type' in msg) return String((msg as { type: unknown }).type);
  return typeof msg;
}
