// Polls a probe on the wall clock until it gives a value: for tests of real processes, whose state
// is read from outside (a port, an HTTP answer, a file).

/** The first value `probe` gives (not undefined), polled every `pollMs`; rejects after `timeoutMs`. */
export async function valueWithin<T>(probe: () => T | undefined | Promise<T | undefined>, timeoutMs: number, pollMs = 250): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, pollMs));
  }
}
