// Genesis and modes that cannot drift: the seed's incident (hq issue 104) replayed, each rule a test.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeMeshKey, signEnvelope } from "../../src/link/index.ts";
import { State } from "../../src/store/index.ts";
import { runCli } from "../support/cli.ts";
import { snapshot, tempDir } from "../support/tmp.ts";

function machine() {
  const base = tempDir();
  const root = join(base, "root");
  mkdirSync(join(root, "etc"), { recursive: true });
  writeFileSync(join(root, "etc/store.conf"), "the predecessor's store\n");
  const state = join(base, "state");
  const bundle = (mode: string, content = "foundation\n") => {
    const file = join(base, `bundle-${mode}-${content.length}.json`);
    writeFileSync(
      file,
      JSON.stringify({
        v: 1,
        node: "ctl",
        mode,
        resources: [{ id: "store", type: "file", path: "/etc/store.conf", content }],
      }),
    );
    return file;
  };
  const cli = (...args: string[]) => runCli([...args, "--state", state, "--root", root]);
  const mode = () => JSON.parse(readFileSync(join(state, "node.json"), "utf8")).mode;
  return { base, root, state, bundle, cli, mode };
}

describe("genesis", () => {
  it("applies the bundle as the first declaration, records the mode, marks the bundle consumed", async () => {
    const m = machine();
    const r = await m.cli("genesis", m.bundle("adopted"), "--mode", "adopted");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^plan:\n.*updated .*store/s);
    expect(m.mode()).toBe("adopted");
    expect(JSON.parse(readFileSync(join(m.state, "genesis.json"), "utf8"))).toMatchObject({
      mode: "adopted",
      digest: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
  });

  it("run twice writes the mode once: a re-run saying the other mode is refused, the mode stays", async () => {
    const m = machine();
    await m.cli("genesis", m.bundle("adopted"), "--mode", "adopted");
    const again = await m.cli("genesis", m.bundle("converged"), "--mode", "converged");
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(
      /says converged, but this node is adopted; only a signed declaration from the mesh \(its converge act\)/,
    );
    expect(m.mode()).toBe("adopted");
    expect((await m.cli("genesis", m.bundle("adopted"), "--mode", "adopted")).code).toBe(0);
    expect(m.mode()).toBe("adopted");
  });

  it("refuses a bundle whose mode is not --mode, and --dry-run changes nothing", async () => {
    const m = machine();
    const before = snapshot(m.root);
    expect((await m.cli("genesis", m.bundle("converged"), "--mode", "adopted")).stderr).toMatch(
      /the bundle says converged, but --mode says adopted/,
    );
    const dry = await m.cli("genesis", m.bundle("adopted"), "--mode", "adopted", "--dry-run", "--json");
    expect(Object.keys(JSON.parse(dry.stdout))).toEqual(["plan"]);
    expect(snapshot(m.root)).toEqual(before);
    expect(existsSync(join(m.state, "genesis.json"))).toBe(false);
  });

  it("replays the incident: an adopted node, a converged bundle, reconcile → refused naming both modes, nothing changed", async () => {
    const m = machine();
    await m.cli("genesis", m.bundle("adopted"), "--mode", "adopted");
    const before = snapshot(m.root);
    const r = await m.cli("reconcile", m.bundle("converged"));
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(/says converged, but this node is adopted/);
    expect(snapshot(m.root)).toEqual(before);
  });

  it("reconcile refuses a bundle that is not what genesis applied, and re-applies the one that is", async () => {
    const m = machine();
    await m.cli("genesis", m.bundle("adopted"), "--mode", "adopted");
    const other = await m.cli("reconcile", m.bundle("adopted", "something else\n"));
    expect(other.code).toBe(2);
    expect(other.stderr).toMatch(/bundle.*is not what genesis applied/);
    writeFileSync(join(m.root, "etc/store.conf"), "drifted\n");
    const same = await m.cli("reconcile", m.bundle("adopted"));
    expect(same.code).toBe(0);
    expect(readFileSync(join(m.root, "etc/store.conf"), "utf8")).toBe("foundation\n");
  });

  it("once the mesh has spoken: genesis is refused, reconcile applies the mesh's declaration and never the bundle; a drifted mode is repaired and said", async () => {
    const m = machine();
    await m.cli("genesis", m.bundle("adopted"), "--mode", "adopted");
    const mesh = makeMeshKey();
    const state = new State(m.state);
    const body = JSON.stringify({
      v: 1,
      node: "ctl",
      mode: "converged",
      resources: [{ id: "store", type: "file", path: "/etc/store.conf", content: "the mesh's\n" }],
    });
    state.writeMembership({
      transport: "nats",
      servers: ["nats://127.0.0.1:4222"],
      fingerprint: "0".repeat(64),
      user: "node.ctl",
      password: "pw",
      stream: "DECLARE",
      consumer: "node-ctl",
      subject: "mesh.declare.ctl",
      mesh_key: mesh.publicB64,
    });
    state.writeDeclared({
      seq: 7,
      digest: "d",
      received_at: new Date().toISOString(),
      envelope: signEnvelope(body, mesh.privateKey),
    });
    // the state says adopted (genesis), the mesh's signed word says converged
    expect((await m.cli("genesis", m.bundle("adopted"), "--mode", "adopted")).code).toBe(2);
    const r = await m.cli("reconcile", m.bundle("adopted"), "--json");
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(doc.report.notes).toEqual([
      "mode repaired: the state said adopted, the mesh's signed declaration says converged",
    ]);
    expect(m.mode()).toBe("converged");
    expect(readFileSync(join(m.root, "etc/store.conf"), "utf8")).toBe("the mesh's\n");
  });
});
