// Strings to table indexes, each once, in order of first use: how an encoding names a node (or an
// error message) once and refers to it by number (the map codecs, the status page's feed).

export class StringTable {
  readonly values: string[] = [];
  private readonly index = new Map<string, number>();

  of(value: string): number {
    let i = this.index.get(value);
    if (i === undefined) {
      i = this.values.length;
      this.values.push(value);
      this.index.set(value, i);
    }
    return i;
  }
}
