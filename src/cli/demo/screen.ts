// Where the demo's output goes. In a terminal: a live frame redrawn twice a second (cursor home,
// then each line cleared to its end), with the story's latest lines under the cluster view. In a
// pipe or CI log: the story's lines as they come and a plain snapshot of the view at each step.

/** What the story tells the person watching. */
export interface Narrator {
  /** A new step of the story, e.g. `b. a node that owns shards is killed`. */
  step(title: string): void;
  say(line: string): void;
  /** The cluster as it is now, where the output is not live (a pipe); a no-op in a terminal. */
  snapshot(): Promise<void>;
}

export interface ScreenOutput {
  write(s: string): unknown;
  readonly isTTY?: boolean;
  readonly rows?: number;
  readonly columns?: number;
}

/** Breaks a line at spaces so no piece is wider than `width`; pieces after the first are indented. */
export function wrap(line: string, width: number): string[] {
  if (line.length <= width) return [line];
  const indent = ' '.repeat(Math.min(line.length - line.trimStart().length + 2, Math.floor(width / 2)));
  const out: string[] = [];
  let rest = line;
  while (rest.length > width) {
    let cut = rest.lastIndexOf(' ', width);
    if (cut <= indent.length) cut = width; // one long word: cut it
    out.push(rest.slice(0, cut).trimEnd());
    rest = indent + rest.slice(cut).trimStart();
  }
  out.push(rest);
  return out;
}

const HOME = '\x1b[H';
const CLEAR_LINE = '\x1b[K';
const CLEAR_BELOW = '\x1b[J';
const CLEAR_ALL = '\x1b[2J';
const HIDE_CURSOR = '\x1b[?25l';
const SHOW_CURSOR = '\x1b[?25h';

export class Screen implements Narrator {
  private readonly story: string[] = [];
  private timer: ReturnType<typeof setInterval> | undefined;
  private drawing = false;
  private live = false;

  constructor(
    private readonly out: ScreenOutput,
    private readonly title: string,
    /** The cluster view as lines (see `renderView`), with the elapsed time. */
    private readonly view: () => Promise<{ elapsedMs: number; lines: string[] }>,
    readonly tty: boolean = out.isTTY === true,
  ) {}

  /** Starts redrawing (terminal only). */
  start(intervalMs = 500): void {
    if (!this.tty || this.live) return;
    this.live = true;
    this.out.write(HIDE_CURSOR + CLEAR_ALL);
    this.timer = setInterval(() => void this.draw(), intervalMs);
    this.timer.unref();
    void this.draw();
  }

  /** Stops redrawing after one last frame; later output is plain text under it. */
  async stop(): Promise<void> {
    if (!this.live) return;
    clearInterval(this.timer);
    this.timer = undefined;
    while (this.drawing) await new Promise((r) => setTimeout(r, 10));
    await this.draw();
    this.live = false;
    this.out.write(SHOW_CURSOR);
  }

  /** Restores the cursor at once (on the way out of an error or a signal). */
  restoreTerminal(): void {
    if (this.tty) this.out.write(SHOW_CURSOR);
  }

  step(title: string): void {
    if (this.live) this.story.push('', title);
    else this.out.write(`\n== ${title}\n`);
  }

  say(line: string): void {
    if (this.live) this.story.push(`   ${line}`);
    else this.out.write(`   ${line}\n`);
  }

  /** Plain text, whether live or not (after `stop`, or for the summary). */
  print(lines: readonly string[]): void {
    this.out.write(lines.map((l) => `${l}\n`).join(''));
  }

  async snapshot(): Promise<void> {
    if (this.live) return;
    const v = await this.view();
    this.out.write(`\n   -- the cluster at t+${(v.elapsedMs / 1000).toFixed(1)} s --\n`);
    this.out.write(v.lines.map((l) => (l ? `   ${l}\n` : '\n')).join(''));
  }

  private async draw(): Promise<void> {
    if (this.drawing) return;
    this.drawing = true;
    try {
      const v = await this.view();
      const width = Math.max(40, this.out.columns ?? 100);
      const fit = (lines: readonly string[]) => lines.flatMap((l) => wrap(l, width));
      const [first, ...more] = this.title.split('\n');
      const head = fit([`${first}   t+${(v.elapsedMs / 1000).toFixed(1)} s`, ...more, '', ...v.lines, '']);
      // Never taller than the terminal (it would scroll on every frame): the story's latest lines
      // fill what the view leaves, and a view taller than the terminal is cut.
      const rows = Math.max(10, (this.out.rows ?? 50) - 1);
      const room = Math.max(3, rows - head.length);
      const story = fit(this.story.slice(-room));
      const tail = story.length > room ? story.slice(story.length - room) : story;
      let frame = [...head, ...tail];
      if (frame.length > rows) frame = [...frame.slice(0, rows - 1), `... ${frame.length - rows + 1} more lines`.slice(0, width)];
      this.out.write(HOME + frame.map((l) => `${l}${CLEAR_LINE}\n`).join('') + CLEAR_BELOW);
    } finally {
      this.drawing = false;
    }
  }
}
