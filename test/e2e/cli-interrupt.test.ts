// An apply stopped part-way (Ctrl-C, SIGTERM) says how far it got, with the partial report, and the next one
// calls the files it never wrote `created`, not `repaired`; `apply -` and `plan -` read standard input.
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { waitFor } from "../mesh/double.ts";
import { runCli, startCli } from "../support/cli.ts";
import { useBuiltExecutable } from "../support/sea.ts";
import { tempMachine } from "../support/tmp.ts";

useBuiltExecutable();

describe("an interrupted apply", () => {
  it.each(["SIGINT", "SIGTERM"] as const)(
    "%s: the step in progress finishes, `interrupted after N of M`, and the next plan says created",
    async (signal) => {
      const { base, root, state } = tempMachine();
      const started = join(base, "started");
      const go = join(base, "go");
      const d = join(base, "d.json");
      // the action waits for the test's word, so the signal lands while it is the step in progress
      const wait = `touch ${started}; while [ ! -e ${go} ]; do sleep 0.05; done`;
      writeFileSync(
        d,
        JSON.stringify({
          v: 1,
          node: "n1",
          mode: "converged",
          resources: [
            { id: "first", type: "file", path: "/etc/first.conf", content: "1\n" },
            { id: "hold-on", type: "action", run: ["sh", "-c", wait] },
            { id: "second", type: "file", path: "/etc/second.conf", content: "2\n" },
            { id: "third", type: "file", path: "/etc/third.conf", content: "3\n" },
          ],
        }),
      );
      const apply = startCli(["apply", d, "--root", root, "--state", state]);
      await waitFor(() => existsSync(started), 60_000, "the action to start");
      apply.child.kill(signal);
      await waitFor(
        () => /interrupted: stopping/.test(apply.output().stderr),
        60_000,
        "the signal to be heard",
      );
      writeFileSync(go, "");
      expect(await apply.exited).toBe(1);
      const out = apply.output().stdout;
      expect(out).toMatch(/^ {2}created +file +first /m);
      expect(out).toMatch(/^ {2}ran +action +hold-on /m);
      expect(out).toMatch(/^ {2}not-reached +file +second +not reached: the apply was interrupted$/m);
      expect(out).toMatch(
        /^interrupted after 2 of 4 steps: the rest were not reached; apply again to finish$/m,
      );
      expect(existsSync(join(root, "etc/second.conf"))).toBe(false);
      // the files it never wrote are new to the machine, not a change someone made
      const plan = await runCli(["plan", d, "--json", "--root", root, "--state", state]);
      const did = Object.fromEntries(
        JSON.parse(plan.stdout).plan.map((p: { id: string; did: string }) => [p.id, p.did]),
      );
      expect(did).toMatchObject({ first: "unchanged", second: "created", third: "created" });
      const again = await runCli(["apply", d, "--json", "--root", root, "--state", state]);
      expect(again.code).toBe(0);
      const steps = JSON.parse(again.stdout).report.steps;
      expect(steps.find((s: { id: string }) => s.id === "second")).toMatchObject({ did: "created" });
      const status = JSON.parse(
        (await runCli(["status", "--json", "--root", root, "--state", state])).stdout,
      );
      expect(status.report.outcome).toBe("applied");
    },
  );
});

describe("standard input", () => {
  it("`plan -` and `apply -` read the declaration from standard input", async () => {
    const { root, state } = tempMachine();
    const body = JSON.stringify({
      v: 1,
      node: "n1",
      mode: "converged",
      resources: [{ id: "motd", type: "file", path: "/etc/motd", content: "from stdin\n" }],
    });
    const plan = await runCli(["plan", "-", "--root", root, "--state", state], { input: body });
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toMatch(/created +file +motd/);
    expect(existsSync(join(root, "etc/motd"))).toBe(false);
    const apply = await runCli(["apply", "-", "--root", root, "--state", state], { input: body });
    expect(apply.code, apply.stderr).toBe(0);
    expect(existsSync(join(root, "etc/motd"))).toBe(true);
    const bad = await runCli(["apply", "-", "--root", root, "--state", state], { input: "{ not json" });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^mesh-host: declaration: the body is not JSON[^\n]*\n$/);
  });
});
