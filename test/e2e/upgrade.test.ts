// Self-upgrade by a clean exit, and a rollback that happens once: the built executable under the real launcher,
// with a restart loop standing in for systemd's Restart=always, against a real nats-server.
import { createHash } from "node:crypto";
import { chmodSync, copyFileSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UPGRADE_CHECK_MS, UPGRADE_SETTLE_MS } from "../../src/defaults.ts";
import { EVENT_WAIT_MS, MeshDouble, waitFor } from "../mesh/index.ts";
import { spawnGroup } from "../support/processes.ts";
import { RestartLoop } from "../support/restart-loop.ts";
import { ensureSea, seaVariant } from "../support/sea.ts";
import { tempDir } from "../support/tmp.ts";

const sha = (p: string) => createHash("sha256").update(readFileSync(p)).digest("hex");

let mesh: MeshDouble;
beforeAll(async () => {
  ensureSea();
  mesh = await MeshDouble.start();
}, 600_000);
afterAll(async () => {
  await mesh?.stop();
});

/** Each start: a heartbeat a second, redials within a second, no drift check to muddy the counts. */
const LOOP_ARGS = ["--heartbeat-s", "1", "--redial-spread-s", "1", "--drift-s", "600"];

async function installedNode(node: string) {
  const base = tempDir();
  const bin = join(base, "usr/bin/mesh-host");
  const state = join(base, "state");
  const root = join(base, "root");
  mkdirSync(join(base, "usr/bin"), { recursive: true });
  mkdirSync(root);
  copyFileSync(ensureSea(), bin);
  chmodSync(bin, 0o755);
  const { code } = await mesh.enrolmentCode(node);
  // not spawnSync: the mesh double answering the enrolment lives in this process's event loop
  const enrol = spawnGroup(bin, ["enrol", code, "--state", state, "--root", root], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  enrol.stderr!.on("data", (d) => (stderr += d));
  const status = await new Promise((r) => enrol.on("exit", r));
  expect(status, stderr).toBe(0);
  return { base, bin, state, root };
}

/** The launcher's `confirmed` says `digest` (read as a+ so a missing file reads empty). */
function confirmedAs(state: string, digest: string, what: string): Promise<void> {
  const confirmed = () => readFileSync(join(state, "confirmed"), { flag: "a+" }).toString().trim();
  return waitFor(() => confirmed() === digest, EVENT_WAIT_MS, what);
}

/** What pacman does: the new file beside the old, renamed over it. */
function replace(bin: string, from: string): void {
  copyFileSync(from, `${bin}.new`);
  chmodSync(`${bin}.new`, 0o755);
  renameSync(`${bin}.new`, bin);
}

const decl = (node: string, content: string) => ({
  v: 1,
  node,
  mode: "converged",
  resources: [{ id: "conf", type: "file", path: "/etc/app.conf", content }],
});

describe("upgrade and rollback under the launcher", () => {
  it("v1 confirms; replaced by v2, it finishes, exits 0, and v2 starts, confirms, and applies", async () => {
    const node = "upgrader";
    const m = await installedNode(node);
    const v1 = sha(m.bin);
    const loop = new RestartLoop(m.bin, m.state, m.root, LOOP_ARGS);
    try {
      await confirmedAs(m.state, v1, "v1 confirmed");
      await mesh.declare(node, decl(node, "from v1\n"));
      await mesh.awaitReport(1, { node });
      const v2 = seaVariant(join(m.base, "v2"), "v2");
      replace(m.bin, v2);
      await waitFor(
        () => readFileSync(join(m.state, "confirmed"), "utf8").trim() === sha(v2),
        EVENT_WAIT_MS,
        "v2 confirmed",
      );
      expect(loop.exits[0]).toBe(0);
      await mesh.declare(node, decl(node, "from v2\n"));
      await waitFor(
        () => readFileSync(join(m.root, "etc/app.conf"), "utf8") === "from v2\n",
        EVENT_WAIT_MS,
        "v2 applying",
      );
    } finally {
      await loop.stop();
    }
    expect(loop.exits.slice(0, -1).every((e) => e === 0)).toBe(true);
  });

  it("a v2 that exits 1 at start: three failed starts, then v1 again, once; its next report says it rolled back", async () => {
    const node = "rollbacker";
    const m = await installedNode(node);
    const v1 = sha(m.bin);
    const loop = new RestartLoop(m.bin, m.state, m.root, LOOP_ARGS);
    try {
      await confirmedAs(m.state, v1, "v1 confirmed");
      await mesh.declare(node, decl(node, "from v1\n"));
      await mesh.awaitReport(1, { node });
      const broken = join(m.base, "v2-broken");
      writeFileSync(broken, "#!/bin/sh\necho 'v2: cannot start' >&2\nexit 1\n", { mode: 0o755 });
      replace(m.bin, broken);
      const note = await mesh.awaitReport(2, { node });
      expect(note.value!.notes?.[0]).toBe(`rolled back from ${sha(broken)} to ${v1} after 3 failed starts`);
      expect(loop.exits.filter((e) => e === 1)).toHaveLength(3);
      // the rolled-back v1 confirms itself again and keeps running: no ping-pong
      await confirmedAs(m.state, v1, "v1 confirmed again");
      const startsThen = loop.starts;
      // lived through two upgrade checks since: its heartbeats' uptime says so, however slow the machine
      const beats = mesh.heartbeats.length;
      const uptimes = () =>
        mesh.heartbeats.slice(beats).flatMap((h) => (h.value?.node === node ? [h.value.uptime_s] : []));
      await waitFor(() => uptimes().length > 0, EVENT_WAIT_MS, "a heartbeat after the confirmation");
      const checksS = (2 * (UPGRADE_CHECK_MS + UPGRADE_SETTLE_MS)) / 1000;
      const from = uptimes()[0]!;
      await waitFor(() => uptimes().some((u) => u >= from + checksS), EVENT_WAIT_MS, "two upgrade checks");
      expect(loop.starts).toBe(startsThen);
      expect(Math.min(...uptimes())).toBeGreaterThanOrEqual(from);
    } finally {
      await loop.stop();
    }
  });
});
