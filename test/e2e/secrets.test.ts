// A whole flow with known secret values: none of them reaches a log, stdout, stderr, a report, the outbox or the state.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadKeys, privateB64, publicKeys } from "../../src/store/index.ts";
import { seal } from "../../src/vocabulary/index.ts";
import { enrolAt } from "../mesh/fleet.ts";
import { MeshDouble } from "../mesh/index.ts";
import { runCli, startRun } from "../support/cli.ts";
import { tempDir } from "../support/tmp.ts";

let mesh: MeshDouble;
beforeAll(async () => {
  mesh = await MeshDouble.start();
});
afterAll(async () => {
  await mesh?.stop();
});

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
}

describe("secrets never leak", () => {
  it("a sealed file secret is written only where declared; no token, password or secret appears anywhere else", async () => {
    const node = "keeper";
    const base = tempDir();
    const { code, token } = await mesh.enrolmentCode(node);
    const { state, root, said: enrolSaid } = await enrolAt(code, base, { codeAs: "argument" });
    // no password exists: the node's sign-in secret is its identity key, which must show only in its 0600 file
    const idKeys = loadKeys(state);
    if (!idKeys.ok) throw new Error(idKeys.reason);
    const password = privateB64(idKeys.keys.identity.privateKey);
    const secretValue = "s3cr3t-value-that-must-never-leak-7f1e";
    const keys = loadKeys(state);
    if (!keys.ok) throw new Error(keys.reason);
    const sealed = seal(Buffer.from(secretValue), publicKeys(keys.keys).sealing);
    const host = startRun(state, root, ["--drift-s", "2"], {
      env: { MESH_LOG: "debug" },
    });
    let outputs = "";
    try {
      await mesh.declare(node, {
        v: 1,
        node,
        mode: "converged",
        secrets: { db: sealed },
        resources: [
          { id: "dbpass", type: "file", path: "/etc/db.pass", secret: "db", mode: "0600" },
          { id: "fails", type: "action", run: ["sh", "-c", "exit 4"] },
        ],
      });
      const report = await mesh.awaitReport(1, { node });
      expect(report.value!.outcome).toBe("failed");
      expect(readFileSync(join(root, "etc/db.pass"), "utf8")).toBe(secretValue);
      expect(statSync(join(root, "etc/db.pass")).mode & 0o777).toBe(0o600);
      await mesh.awaitHeartbeat(2);
      const status = await runCli(["status", "--json", "--state", state, "--root", root]);
      const dry = await runCli(["reconcile", "--dry-run", "--json", "--state", state, "--root", root]);
      outputs = [enrolSaid, status.stdout, status.stderr, dry.stdout, dry.stderr].join("\n");
    } finally {
      await host.stop("SIGKILL");
    }
    const { stdout, stderr } = host.output();
    outputs += `${stdout}\n${stderr}`;
    const said = [...mesh.reports, ...mesh.heartbeats]
      .map((m) => Buffer.from(m.data).toString("utf8"))
      .join("\n");
    // the key files and the membership are where the node's own credentials belong; nothing else may hold them
    const stateFiles = filesUnder(state).filter(
      (f) => !relative(state, f).startsWith("identity/") && !f.endsWith("membership.json"),
    );
    const stateText = stateFiles.map((f) => readFileSync(f, "utf8")).join("\n");
    for (const [name, value] of [
      ["secret", secretValue],
      ["token", token],
      ["identity key", password],
    ] as const) {
      expect(outputs.includes(value), `${name} in an output`).toBe(false);
      expect(said.includes(value), `${name} in a report or heartbeat`).toBe(false);
      expect(stateText.includes(value), `${name} in the state directory`).toBe(false);
    }
    expect(stateFiles.length).toBeGreaterThan(3);
  });
});
