// Timers in a binary heap ordered by (due time, order of arming): the next one due is found in
// O(1) and each push or pop costs O(log n), where sorting them all, or a timer of the runtime
// each, cost far more for tens of thousands (a simulator fires that many per run; a node has a
// poll timer per shard copy). A cancelled timer stays in the heap, marked, until it reaches the
// top, where it is dropped unfired; when cancelled ones outnumber live ones the heap is rebuilt
// without them, so timers armed and cancelled again and again do not pile up.

export interface HeapTimer {
  readonly at: number;
  readonly seq: number;
  /** Fired or cancelled: a cancel does nothing any more. */
  done: boolean;
}

/** Whether `a` fires before `b`: earlier, or as early and armed first. */
const before = (a: HeapTimer, b: HeapTimer) => a.at < b.at || (a.at === b.at && a.seq < b.seq);

/** Cancelled timers in the heap past which it is rebuilt once they are more than half of it. */
const REBUILD_AFTER = 1024;

export class TimerHeap<T extends HeapTimer> {
  private heap: T[] = [];
  private cancelled = 0;

  /** Live timers: armed, neither fired nor cancelled. */
  get size(): number {
    return this.heap.length - this.cancelled;
  }

  push(timer: T): void {
    const h = this.heap;
    h.push(timer);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(timer, h[parent]!)) break;
      h[i] = h[parent]!;
      i = parent;
    }
    h[i] = timer;
  }

  /** Marks `timer` (in this heap) cancelled: it never comes out of `top` or `pop`. */
  cancel(timer: T): void {
    if (timer.done) return;
    timer.done = true;
    this.cancelled += 1;
    if (this.cancelled > REBUILD_AFTER && this.cancelled * 2 > this.heap.length) this.rebuild();
  }

  /** The first live timer (cancelled ones on top are dropped on the way). */
  top(): T | undefined {
    while (this.heap.length > 0 && this.heap[0]!.done) {
      this.removeTop();
      this.cancelled -= 1;
    }
    return this.heap[0];
  }

  /** Takes the first live timer out, marked done (it fires now). */
  pop(): T | undefined {
    const first = this.top();
    if (first === undefined) return undefined;
    this.removeTop();
    first.done = true;
    return first;
  }

  /** Marks every timer done and empties the heap. */
  clear(): void {
    for (const t of this.heap) t.done = true;
    this.heap = [];
    this.cancelled = 0;
  }

  private removeTop(): void {
    const h = this.heap;
    const last = h.pop()!;
    if (h.length === 0) return;
    this.siftDown(0, last);
  }

  /** Places `timer` at `i` or below, moving earlier children up. */
  private siftDown(start: number, timer: T): void {
    const h = this.heap;
    let i = start;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= h.length) break;
      const right = left + 1;
      const child = right < h.length && before(h[right]!, h[left]!) ? right : left;
      if (!before(h[child]!, timer)) break;
      h[i] = h[child]!;
      i = child;
    }
    h[i] = timer;
  }

  private rebuild(): void {
    this.heap = this.heap.filter((t) => !t.done);
    this.cancelled = 0;
    for (let i = (this.heap.length >> 1) - 1; i >= 0; i--) this.siftDown(i, this.heap[i]!);
  }
}
