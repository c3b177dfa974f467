/**
 * `n` and the noun in the number that fits it: "1 copy", "3 copies". Operators read these counts in
 * replies and logs, where "1 copies" reads like a bug.
 */
export function count(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
