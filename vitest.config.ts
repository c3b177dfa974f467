import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    reporters: ['default', './test/support/summary-reporter.ts'],
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
        },
      },
      {
        test: {
          name: 'sim',
          include: ['test/sim/**/*.test.ts'],
          testTimeout: 120_000,
        },
      },
    ],
  },
});
