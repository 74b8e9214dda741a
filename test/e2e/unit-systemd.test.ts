// The unit under a real systemd (PID 1 of an nspawn container, test/support/systemd.ts), installed the way a
// copy-and-run machine gets it (`mesh-host install-service` run inside the container): before enrolment it
// waits without spinning, it starts the host once enrol wrote its files, and a stop mid-action lets the action
// finish (SIGTERM to the host alone) and then ends what the action left behind (KillMode=mixed).
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureKeys, State } from "../../src/store/index.ts";
import { makeMeshKey, signEnvelope } from "../../src/vocabulary/index.ts";
import { ensureSea } from "../support/sea.ts";
import { bootContainer, type Container } from "../support/systemd.ts";

const UNIT = "mesh-host.service";
/** Long enough for any step on a busy machine; every wait ends on an event well before it. */
const DEADLINE_MS = 120_000;
const isRoot = process.getuid?.() === 0;

let c: Container;

async function until<T>(what: string, probe: () => Promise<T | null | undefined | false>): Promise<T> {
  const end = Date.now() + DEADLINE_MS;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function show(prop: string): Promise<string> {
  const r = await c.systemctl("show", "-p", prop, "--value", UNIT);
  return r.stdout.trim();
}

async function journal(): Promise<string[]> {
  const r = await c.exec.run(["journalctl", "-u", UNIT, "-o", "cat", "--no-pager", "-q"]);
  return r.stdout.split("\n").filter(Boolean);
}

/** What `mesh-host enrol` leaves, written by the same store code and in its order; the bus is nowhere. */
function enrol(body?: string) {
  const dir = join(c.root, "var/lib/mesh-host");
  const state = new State(dir);
  // its keys first, as enrol makes them: a node that cannot sign what it says does not start
  if (!ensureKeys(dir).ok) throw new Error(`cannot make the node's keys in ${dir}`);
  const mesh = makeMeshKey();
  state.writeMembership({
    transport: "nats",
    servers: ["nats://127.0.0.1:1"],
    fingerprint: "0".repeat(64),
    user: "node.unit",
    password: "pw",
    stream: "DECLARE",
    consumer: "node-unit",
    subject: "mesh.declare.unit",
    mesh_key: mesh.publicB64,
  });
  state.writeNode({ node: "unit", mode: null });
  if (body)
    state.writeDeclared({
      seq: 1,
      digest: "d",
      received_at: new Date().toISOString(),
      envelope: signEnvelope(body, mesh.privateKey),
    });
}

async function pidAlive(pid: string): Promise<boolean> {
  // the container's minimal root has no procps: the shell's own kill
  return (await c.exec.run(["sh", "-c", `kill -0 ${pid}`])).code === 0;
}

beforeAll(async () => {
  if (!isRoot) return;
  const sea = ensureSea();
  c = await bootContainer();
  copyFileSync(sea, join(c.root, "var/tmp/mesh-host"));
  const installed = await c.exec.run(["/var/tmp/mesh-host", "install-service"]);
  if (installed.code !== 0) throw new Error(`install-service failed: ${installed.stderr}`);
  // the launcher looks every second instead of five: more looks in the same time, none of them said
  mkdirSync(join(c.root, "etc/systemd/system/mesh-host.service.d"), { recursive: true });
  writeFileSync(
    join(c.root, "etc/systemd/system/mesh-host.service.d/poll.conf"),
    "[Service]\nEnvironment=MESH_HOST_ENROL_POLL_S=1\n",
  );
  await c.systemctl("daemon-reload");
}, 300_000);

afterAll(async () => {
  // an action still waiting would hold the poweroff for TimeoutStopSec (a day): let it end first
  if (c) writeFileSync(join(c.root, "var/tmp/finish"), "");
  await c?.stop();
});

describe.skipIf(!isRoot)("the unit under systemd", () => {
  it("before enrolment waits without spinning: one process, no restarts, three journal lines; enrol starts the host", async () => {
    const start = await c.systemctl("start", UNIT);
    expect(start.code, start.stderr).toBe(0);
    const main = await until("the launcher to run", async () => {
      const pid = await show("MainPID");
      return pid !== "0" && pid;
    });
    // a dozen looks at the state directory (a new `sleep` each), more than two of the old restart periods
    const sleeps = new Set<string>();
    await until("12 polls", async () => {
      const r = await c.exec.run(["cat", `/proc/${main}/task/${main}/children`]);
      for (const p of r.stdout.split(/\s+/).filter(Boolean)) sleeps.add(p);
      return sleeps.size >= 12;
    });
    expect(await show("MainPID")).toBe(main);
    expect(await show("NRestarts")).toBe("0");
    expect(await show("ActiveState")).toBe("active");
    // three lines and no more; systemd's "Started" and the launcher's own line race into the journal, in either order
    const lines = await journal();
    expect([...lines].sort()).toEqual(
      [
        "Starting mesh-host.service - mesh-host, the agent that holds this machine in its mesh...",
        "Started mesh-host.service - mesh-host, the agent that holds this machine in its mesh.",
        "mesh-host-launch: this node is not enrolled yet (no membership in /var/lib/mesh-host): waiting for `mesh-host enrol` (the code on its standard input)",
      ].sort(),
    );
    expect(lines[0]).toMatch(/^Starting mesh-host\.service/);

    enrol();
    await until("the host to start", async () =>
      (await journal()).some((l) => l.includes("holding the node in its mesh")),
    );
    // the launcher exec'd the host: the same main process, still no restart
    expect(await show("MainPID")).toBe(main);
    expect(await show("NRestarts")).toBe("0");
    expect((await journal()).some((l) => l.includes("enrolled: starting the host"))).toBe(true);
    const stop = await c.systemctl("stop", UNIT);
    expect(stop.code, stop.stderr).toBe(0);
  }, 300_000);

  it("a stop mid-action lets the action finish, then ends what it left running (KillMode=mixed)", async () => {
    const tmp = join(c.root, "var/tmp");
    const body = JSON.stringify({
      v: 1,
      node: "unit",
      mode: "converged",
      resources: [
        {
          id: "slow",
          type: "action",
          creates: "/var/tmp/action-done",
          timeout_s: 600,
          run: [
            "/bin/sh",
            "-c",
            // a child in a session of its own, then the step itself, which ends when the test says so
            "setsid sleep 3600 </dev/null >/dev/null 2>&1 & echo $! > /var/tmp/straggler; echo $$ > /var/tmp/action-started; " +
              "while [ ! -e /var/tmp/finish ]; do sleep 0.1; done; echo done > /var/tmp/action-done",
          ],
        },
      ],
    });
    enrol(body);
    await c.systemctl("start", UNIT);
    await until("the action to start", async () => existsSync(join(tmp, "action-started")));
    const straggler = readFileSync(join(tmp, "straggler"), "utf8").trim();
    const action = readFileSync(join(tmp, "action-started"), "utf8").trim();

    const stop = await c.systemctl("stop", "--no-block", UNIT);
    expect(stop.code, stop.stderr).toBe(0);
    await until("the stop to begin", async () => (await show("ActiveState")) === "deactivating");
    // SIGTERM went to the host alone: the action's shell and its straggler are still there
    expect(await pidAlive(action)).toBe(true);
    expect(await pidAlive(straggler)).toBe(true);

    writeFileSync(join(tmp, "finish"), "");
    await until("the unit to stop", async () => (await show("ActiveState")) === "inactive");
    expect(readFileSync(join(tmp, "action-done"), "utf8")).toBe("done\n");
    // and what the action left running went with the host
    expect(await pidAlive(straggler)).toBe(false);
    expect(await show("Result")).toBe("success");
    expect((await journal()).some((l) => l.includes("exiting cleanly"))).toBe(true);
  }, 300_000);
});
