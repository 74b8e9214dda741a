import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // failure bounds on a busy two-core machine, not paces: a test waits on events, and one that comes ends it
    testTimeout: 300_000,
    hookTimeout: 600_000,
    pool: "forks",
    // names the run in every process's environment; fails it when one of them is left running
    globalSetup: ["test/support/global-setup.ts"],
  },
});
