import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["app/**/*.test.ts", "e2e/**/*.e2e.test.ts"],
    // Tests spawn the CLI and run real models: give them room on 2 cores.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
    maxWorkers: 2,
    reporters: ["default", "./app/test/summary-reporter.ts"],
  },
});
