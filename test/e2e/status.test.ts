// `status` as a monitoring check, through the built executable: the last apply's failed steps and why (kept by
// the machine in last-report.json), whether `run` is alive, the link up or down since when, the last
// heartbeat, the outbox; exit 1 when the last apply failed or an enrolled node's link is down, 0 when well.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitForAsync } from "../mesh/double.ts";
import { MeshDouble } from "../mesh/index.ts";
import { runCli, startRun } from "../support/cli.ts";
import { useBuiltExecutable } from "../support/sea.ts";
import { tempMachine } from "../support/tmp.ts";

useBuiltExecutable();

function declaration(base: string, name: string, resources: unknown[]): string {
  const file = join(base, name);
  writeFileSync(file, JSON.stringify({ v: 1, node: "n1", mode: "converged", resources }));
  return file;
}

const conf = { id: "conf", type: "file", path: "/etc/app.conf", content: "a=1\n" };
const boom = { id: "boom", type: "action", run: ["sh", "-c", "echo the disk is full >&2; exit 3"] };
const after = { id: "later", type: "file", path: "/etc/later.conf", content: "b\n" };

describe("status offline", () => {
  it("a state directory that is not there: exit 1 naming it, never `health: ok` (a typo in --state)", async () => {
    const { root, state } = tempMachine();
    const text = await runCli(["status", "--root", root, "--state", state]);
    expect(text.code, text.stderr).toBe(1);
    const missing = `no state at ${state}: mesh-host has never run here, or --state names the wrong directory`;
    const health = text.stdout.split("\n").find((l) => l.startsWith("health:"));
    expect(health?.replace(/^health: +/, "")).toBe(missing);
    const json = await runCli(["status", "--json", "--root", root, "--state", state]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: false, problems: [missing] });
    // status only looks: it never makes the directory it says is missing
    expect(existsSync(state)).toBe(false);
  });

  it("an empty root and an empty state: all is well, exit 0, the JSON keys stable", async () => {
    const { root, state } = tempMachine();
    mkdirSync(state);
    const r = await runCli(["status", "--json", "--root", root, "--state", state]);
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(doc).toMatchObject({ ok: true, problems: [], run: null, link: null, report: null, outbox: 0 });
    for (const key of [
      "node",
      "last",
      "report",
      "run",
      "link",
      "heartbeat_at",
      "outbox",
      "outbox_oldest",
      "ok",
    ])
      expect(doc).toHaveProperty(key);
  });

  it("a failed apply: the failed step and its reason kept, exit 1 until an apply succeeds", async () => {
    const { base, root, state } = tempMachine();
    const bad = declaration(base, "bad.json", [conf, boom, after]);
    expect((await runCli(["apply", bad, "--root", root, "--state", state])).code).toBe(1);
    const kept = JSON.parse(readFileSync(join(state, "last-report.json"), "utf8")).report;
    expect(kept.steps.map((s: { did: string }) => s.did)).toEqual(["created", "failed", "not-reached"]);
    const text = await runCli(["status", "--root", root, "--state", state]);
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(/^failed: +boom \(action\): .*the disk is full/m);
    expect(text.stdout).toMatch(/^not reached: +1 step\(s\) after the failure$/m);
    expect(text.stdout).toMatch(/^health: +the last apply failed$/m);
    const json = JSON.parse((await runCli(["status", "--json", "--root", root, "--state", state])).stdout);
    expect(json.report).toMatchObject({
      outcome: "failed",
      failed: [{ id: "boom", type: "action" }],
      not_reached: 1,
    });
    expect(json.problems).toEqual(["the last apply failed"]);
    const good = declaration(base, "good.json", [conf, after]);
    expect((await runCli(["apply", good, "--root", root, "--state", state])).code).toBe(0);
    const well = await runCli(["status", "--root", root, "--state", state]);
    expect(well.code).toBe(0);
    expect(well.stdout).toMatch(/^health: +ok$/m);
    expect(well.stdout).not.toMatch(/^failed:/m);
  });

  it("every offline apply moves the last apply's time (issue 17 item 6), a dry run does not", async () => {
    const { base, root, state } = tempMachine();
    const good = declaration(base, "good.json", [conf]);
    const lastAt = async () =>
      JSON.parse((await runCli(["status", "--json", "--root", root, "--state", state])).stdout).last.at;
    await runCli(["apply", good, "--root", root, "--state", state]);
    const first = await lastAt();
    await runCli(["apply", good, "--root", root, "--state", state]);
    const second = await lastAt();
    expect(Date.parse(second)).toBeGreaterThan(Date.parse(first));
    await runCli(["plan", good, "--root", root, "--state", state]);
    expect(await lastAt()).toBe(second);
  });
});

describe("status of an enrolled node", () => {
  let mesh: MeshDouble;
  beforeAll(async () => {
    mesh = await MeshDouble.start();
  });
  afterAll(async () => {
    await mesh?.stop();
  });

  it("link down while run is not running, up with a heartbeat while it is, down again once it stops", async () => {
    const { root, state } = tempMachine();
    const { code } = await mesh.enrolmentCode("status-a");
    expect((await runCli(["enrol", code, "--state", state, "--root", root])).code).toBe(0);
    const status = async () => {
      const r = await runCli(["status", "--json", "--root", root, "--state", state]);
      return { code: r.code, doc: JSON.parse(r.stdout) };
    };
    const never = await status();
    expect(never.code).toBe(1);
    expect(never.doc.link).toMatchObject({ up: false, error: "mesh-host run has never run here" });
    expect(never.doc.problems).toEqual(["the link is down"]);

    let upSince = "";
    const host = startRun(state, root);
    try {
      await waitForAsync(
        async () => (await status()).doc.heartbeat_at !== null,
        30_000,
        "a heartbeat in status",
      );
      const up = await status();
      expect(up.code).toBe(0);
      expect(up.doc.run).toMatchObject({ alive: true, pid: host.child.pid });
      expect(up.doc.link).toMatchObject({ up: true, error: null });
      const text = await runCli(["status", "--root", root, "--state", state]);
      expect(text.stdout).toMatch(new RegExp(`^run: +running: pid ${host.child.pid} since `, "m"));
      expect(text.stdout).toMatch(/^link: +up since \d{4}-/m);
      upSince = up.doc.link.since;
      expect(text.stdout).toMatch(/^heartbeat: +last sent at \d{4}-/m);
    } catch (e) {
      await host.stop();
      throw new Error(`${(e as Error).message}\n${host.output().stderr}`);
    }
    expect(await host.stop()).toBe(0);
    const stopped = await status();
    expect(stopped.code).toBe(1);
    expect(stopped.doc.run).toMatchObject({ alive: false });
    expect(stopped.doc.link.error).toMatch(/is not running/);
    // down since it stopped, never since the time it came up
    expect(stopped.doc.link.since).not.toBe(upSince);
    expect(Date.parse(stopped.doc.link.since)).toBeGreaterThan(Date.parse(upSince));
    const said = await runCli(["status", "--root", root, "--state", state]);
    expect(said.stdout).toMatch(
      new RegExp(
        `^link: +down since ${stopped.doc.link.since}: mesh-host run \\(pid ${host.child.pid}\\) is not running$`,
        "m",
      ),
    );
    expect(existsSync(join(state, "run.json"))).toBe(true);
  });
});
