// Genesis and modes that cannot drift: the seed's incident (hq issue 104) replayed, each rule a test.
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ensureKeys, publicKeys, State } from "../../src/store/index.ts";
import { makeMeshKey, seal, signEnvelope } from "../../src/vocabulary/index.ts";
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

/** The node enrolled and the mesh spoke: its membership, and `body` as the kept, signed declaration. */
function meshSpoke(stateDir: string, body: string, seq = 7): void {
  const mesh = makeMeshKey();
  const state = new State(stateDir);
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
    seq,
    digest: "d",
    received_at: new Date().toISOString(),
    envelope: signEnvelope(body, mesh.privateKey),
  });
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
    const body = JSON.stringify({
      v: 1,
      node: "ctl",
      mode: "converged",
      resources: [{ id: "store", type: "file", path: "/etc/store.conf", content: "the mesh's\n" }],
    });
    meshSpoke(m.state, body);
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

/** Every file under `dir`, as text: where a secret must never be found. */
function everything(dir: string): string {
  if (!existsSync(dir)) return "";
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .map((rel) => join(dir, rel))
    .filter((p) => statSync(p).isFile())
    .map((p) => readFileSync(p, "latin1"))
    .join("\n");
}

describe("a secret the installer gives genesis", () => {
  const VALUE = "pg-superuser-7f3a9c";
  const bundleNaming = (m: ReturnType<typeof machine>, name = "superuser") => {
    const file = join(m.base, `bundle-secret-${name}.json`);
    writeFileSync(
      file,
      JSON.stringify({
        v: 1,
        node: "ctl",
        mode: "adopted",
        secrets: { [name]: "installer" },
        resources: [
          { id: "superuser", type: "file", path: "/etc/store/superuser", secret: name, mode: "0600" },
        ],
      }),
    );
    return file;
  };
  const given = (m: ReturnType<typeof machine>, bytes: string) => {
    const file = join(m.base, "installer-secret");
    writeFileSync(file, bytes, { mode: 0o600 });
    return file;
  };
  const written = (m: ReturnType<typeof machine>) => readFileSync(join(m.root, "etc/store/superuser"));
  /** genesis of the bundle naming the installer secret, given as `bytes` in a file. */
  const genesisGiven = (m: ReturnType<typeof machine>, bytes: string, ...more: string[]) =>
    m.cli(
      "genesis",
      bundleNaming(m),
      "--mode",
      "adopted",
      "--secret",
      `superuser=${given(m, bytes)}`,
      ...more,
    );

  it("is written as the value alone (no line ending), and is never printed or kept in the state", async () => {
    for (const ending of ["\n", "\r\n", ""]) {
      const m = machine();
      const r = await genesisGiven(m, VALUE + ending, "--json");
      expect(r.code, r.stderr).toBe(0);
      expect(written(m)).toEqual(Buffer.from(VALUE));
      expect((statSync(join(m.root, "etc/store/superuser")).mode & 0o777).toString(8)).toBe("600");
      expect(r.stdout + r.stderr + everything(m.state)).not.toContain(VALUE);
    }
  });

  it("is given again to reconcile the consumed bundle before the mesh has spoken; without it, refused", async () => {
    const m = machine();
    const secret = `superuser=${given(m, `${VALUE}\n`)}`;
    expect((await m.cli("genesis", bundleNaming(m), "--mode", "adopted", "--secret", secret)).code).toBe(0);
    writeFileSync(join(m.root, "etc/store/superuser"), "drifted");
    const without = await m.cli("reconcile", bundleNaming(m));
    expect(without.code).toBe(2);
    expect(without.stderr).toMatch(/secret "superuser" is the installer's, and none was given/);
    expect(readFileSync(join(m.root, "etc/store/superuser"), "utf8")).toBe("drifted");
    const again = await m.cli("reconcile", bundleNaming(m), "--secret", secret);
    expect(again.code, again.stderr).toBe(0);
    expect(written(m)).toEqual(Buffer.from(VALUE));
  });

  it("is the value the mesh later seals for the same file: its declaration reconciles, unchanged", async () => {
    const m = machine();
    const r = await genesisGiven(m, `${VALUE}\n`);
    expect(r.code, r.stderr).toBe(0);
    // the node enrols (its keys), and the mesh declares the same file with the value sealed to it
    const keys = ensureKeys(m.state);
    if (!keys.ok) throw new Error(keys.reason);
    const body = JSON.stringify({
      v: 1,
      node: "ctl",
      mode: "adopted",
      secrets: { "postgres.superuser": seal(Buffer.from(VALUE), publicKeys(keys.keys).sealing) },
      resources: [
        {
          id: "postgres.superuser",
          type: "file",
          path: "/etc/store/superuser",
          secret: "postgres.superuser",
          mode: "0600",
        },
      ],
    });
    meshSpoke(m.state, body, 3);
    const before = statSync(join(m.root, "etc/store/superuser")).mtimeMs;
    const again = await m.cli("reconcile", "--json");
    expect(again.code, again.stderr).toBe(0);
    const steps = JSON.parse(again.stdout).report.steps;
    expect(steps.map((s: { id: string; did: string }) => `${s.id}:${s.did}`)).toContain(
      "postgres.superuser:unchanged",
    );
    expect(statSync(join(m.root, "etc/store/superuser")).mtimeMs).toBe(before);
    expect(again.stdout + again.stderr).not.toContain(VALUE);
  });

  it("refuses, changing nothing, a bundle whose installer secret is not given, a name the bundle does not name, an empty file", async () => {
    const m = machine();
    const before = snapshot(m.root);
    const missing = await m.cli("genesis", bundleNaming(m), "--mode", "adopted");
    expect(missing.code).toBe(2);
    expect(missing.stderr.trim().split("\n")).toHaveLength(1);
    expect(missing.stderr).toMatch(/secret "superuser" is the installer's, and none was given/);
    const typo = await m.cli(
      "genesis",
      bundleNaming(m),
      "--mode",
      "adopted",
      "--secret",
      `superuser=${given(m, VALUE)}`,
      "--secret",
      `superusr=${given(m, VALUE)}`,
    );
    expect(typo.code).toBe(2);
    expect(typo.stderr).toMatch(/--secret superusr: the declaration names no installer secret "superusr"/);
    const empty = await m.cli(
      "genesis",
      bundleNaming(m),
      "--mode",
      "adopted",
      "--secret",
      `superuser=${given(m, "\n")}`,
    );
    expect(empty.code).toBe(2);
    expect(empty.stderr).toMatch(/--secret superuser: .* is empty/);
    const elsewhere = await m.cli("status", "--secret", `superuser=${given(m, VALUE)}`);
    expect(elsewhere.code).toBe(2);
    expect(elsewhere.stderr).toMatch(
      /status takes no --secret \(it is a flag of apply, plan, genesis, reconcile\)/,
    );
    for (const r of [missing, typo, empty, elsewhere]) expect(r.stdout + r.stderr).not.toContain(VALUE);
    expect(snapshot(m.root)).toEqual(before);
    expect(existsSync(join(m.state, "genesis.json"))).toBe(false);
  });

  it("a declaration from the mesh naming an installer secret is refused: the mesh seals its values", async () => {
    const m = machine();
    await m.cli("genesis", m.bundle("adopted"), "--mode", "adopted");
    meshSpoke(m.state, readFileSync(bundleNaming(m), "utf8"), 3);
    const before = snapshot(m.root);
    const r = await m.cli("reconcile");
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/secret "superuser" is the installer's, and none was given/);
    const withFlag = await m.cli("reconcile", "--secret", `superuser=${given(m, VALUE)}`);
    expect(withFlag.code).toBe(2);
    expect(withFlag.stderr).toMatch(/--secret is for a bundle, and the mesh has spoken/);
    expect(snapshot(m.root)).toEqual(before);
  });
});
