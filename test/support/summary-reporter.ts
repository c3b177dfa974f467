import type { Reporter, TestModule } from 'vitest/node';

/**
 * Prints one plain `N passed, N failed` line at the end of a run, counted from vitest's own
 * results, so CI (and a person) can see at a glance how many tests ran; a run that executed no
 * test shows `0 passed, 0 failed` instead of looking green.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const module of testModules) {
      let failedHere = 0;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed += 1;
        else if (state === 'failed') failedHere += 1;
        else skipped += 1;
      }
      // A file that failed without a failed test (it did not load, or a beforeAll threw and its
      // tests were skipped) is still a failure.
      failed += module.state() === 'failed' && failedHere === 0 ? 1 : failedHere;
    }
    failed += unhandledErrors.length;
    const tail = skipped > 0 ? `, ${skipped} skipped` : '';
    process.stdout.write(`\n${passed} passed, ${failed} failed${tail}\n`);
  }
}
