// `mesh init` and the mesh commands that need no bus, through the built executable: what init makes and
// refuses, `node add`'s code and its file, and every wrong or stale input: one line, exit 2, nothing changed.
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { enrolPermissions, MeshDir, nodePermissions } from "../../src/mesh/index.ts";
import { decodeCode } from "../../src/vocabulary/index.ts";
import { NATS_SERVER } from "../mesh/index.ts";
import { initMesh, mesh, serverDir } from "../mesh/operator.ts";
import { ensureSea } from "../support/sea.ts";
import { snapshot, tempDir } from "../support/tmp.ts";

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);

const mode = (p: string) => statSync(p).mode & 0o777;

/** Refused: exit 2, one line on stderr naming what was wrong, nothing on stdout, the directory unchanged. */
async function refused(dir: string, args: string[], says: RegExp, opts: { input?: string } = {}) {
  const before = snapshot(dir);
  const r = await mesh(dir, args, opts);
  expect(r.code, r.stderr).toBe(2);
  expect(r.stdout).toBe("");
  expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
  expect(r.stderr).toMatch(says);
  expect(snapshot(dir)).toEqual(before);
  return r;
}

describe("mesh init", () => {
  it("makes a 0700 mesh directory whose server configuration nats-server accepts, no secret on stdout", async () => {
    const base = tempDir();
    const dir = join(base, "m");
    const r = await mesh(dir, ["init", "--server", "127.0.0.1:4999"]);
    expect(r.code, r.stderr).toBe(0);
    expect(mode(dir)).toBe(0o700);
    for (const f of ["signing.key", "accounts.json", "tls/key.pem", "servers/1/server.conf"])
      expect(mode(join(dir, f)), f).toBe(0o600);
    const m = new MeshDir(dir);
    const config = m.config();
    expect(config.servers).toEqual([{ host: "127.0.0.1", port: 4999 }]);
    expect(r.stdout).toContain(config.fingerprint);
    const seeds = Object.values(JSON.parse(readFileSync(join(dir, "accounts.json"), "utf8")) as object);
    expect(seeds).toHaveLength(4);
    for (const s of [...seeds, readFileSync(join(dir, "signing.key"), "utf8")])
      expect(r.stdout + r.stderr).not.toContain(String(s).trim());
    const test = spawnSync(NATS_SERVER, ["-c", join(serverDir(dir, 1), "server.conf"), "-t"], {
      encoding: "utf8",
    });
    expect(test.status, test.stderr).toBe(0);
    const conf = readFileSync(join(serverDir(dir, 1), "server.conf"), "utf8");
    expect(conf).toMatch(/tls \{/);
    expect(conf).not.toMatch(/verify/);
    expect(conf).not.toMatch(/cluster/);
    // decentralized: the operator, the system account, the full resolver; no user, no password, no seed
    expect(conf).toMatch(/^operator: "ey/m);
    expect(conf).toMatch(/resolver: \{ type: full/);
    expect(conf).not.toMatch(/password|users|include/);
    // no monitoring port: nothing but the clients' (and a cluster's routes') listens
    expect(conf).not.toMatch(/^\s*(http|https|monitor_port)\s*:/m);
    for (const s of seeds) expect(conf).not.toContain(String(s));
  });

  it("--servers 3 makes a cluster: routes to the two others, authenticated by TLS with the mesh's own certificate", async () => {
    const dir = join(tempDir(), "m");
    const r = await mesh(dir, ["init", "--servers", "3"]);
    expect(r.code, r.stderr).toBe(0);
    const ports = new MeshDir(dir).config().servers.map((s) => s.port);
    expect(new Set(ports).size).toBe(3);
    for (const i of [1, 2, 3]) {
      const conf = readFileSync(join(serverDir(dir, i), "server.conf"), "utf8");
      const routes = [...conf.matchAll(/nats-route:\/\/127\.0\.0\.1:(\d+)/g)].map((m) => Number(m[1]));
      expect(routes.sort()).toEqual(
        ports
          .filter((_, j) => j !== i - 1)
          .map((p) => p + 1)
          .sort(),
      );
      expect(conf).toMatch(/ca_file/);
      expect(conf).toMatch(/verify: true/);
      expect(conf).not.toMatch(/password/);
      const test = spawnSync(NATS_SERVER, ["-c", join(serverDir(dir, i), "server.conf"), "-t"], {
        encoding: "utf8",
      });
      expect(test.status, test.stderr).toBe(0);
    }
  });

  it("refuses to overwrite a mesh, a non-empty directory, and bad flags", async () => {
    const base = tempDir();
    const dir = join(base, "m");
    await initMesh(dir, [4998]);
    await refused(dir, ["init"], /is already a mesh: init never overwrites one/);
    const other = join(base, "other");
    mkdirSync(other);
    writeFileSync(join(other, "x"), "x");
    await refused(other, ["init"], /is not empty/);
    const fresh = join(base, "fresh");
    mkdirSync(fresh);
    await refused(fresh, ["init", "--server", "nohost"], /--server must be HOST:PORT/);
    await refused(fresh, ["init", "--servers", "0"], /--servers must be a whole number from 1/);
    await refused(
      fresh,
      ["init", "--servers", "3", "--server", "127.0.0.1:1"],
      /--servers 3 but 1 --server given/,
    );
    await refused(fresh, ["init", "--only", "1"], /mesh init does not take --only/);
    await refused(fresh, ["nodes"], /is not a mesh \(no mesh.json\)/);
  });
});

describe("mesh node add and rm, without the bus", () => {
  it("prints the enrolment code and nothing else; the code pins the mesh's certificate", async () => {
    const dir = join(tempDir(), "m");
    await initMesh(dir, [4997]);
    const r = await mesh(dir, ["node", "add", "web-1"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trimEnd().split("\n")).toHaveLength(1);
    const code = decodeCode(r.stdout);
    if (!code.ok) throw new Error(code.reason);
    const config = new MeshDir(dir).config();
    expect(code.value).toMatchObject({
      node: "web-1",
      servers: ["nats://127.0.0.1:4997"],
      fingerprint: config.fingerprint,
    });
    if (!("jwt" in code.value)) throw new Error("a v1 code");
    const record = new MeshDir(dir).known("web-1");
    expect(mode(join(dir, "nodes/web-1.json"))).toBe(0o600);
    // the code's enrolling user: exactly protocol.md's enrolling grants, expiring with the code (24 h)
    const claims = JSON.parse(Buffer.from(code.value.jwt.split(".")[1]!, "base64url").toString()) as {
      sub: string;
      name: string;
      exp: number;
      nats: { pub: { allow: string[] }; sub: { allow: string[] } };
    };
    expect(claims.sub).toBe(record.enrol?.user);
    expect(claims.name).toBe("enrol.web-1");
    expect({ publish: claims.nats.pub, subscribe: claims.nats.sub }).toEqual(enrolPermissions("web-1"));
    expect(Math.abs(claims.exp - (Date.now() / 1000 + 24 * 3600))).toBeLessThan(120);
    expect(Date.parse(record.enrol!.expires_at)).toBe(claims.exp * 1000);
    // nothing of the node's reached a server's configuration: no file is rewritten per node
    expect(readFileSync(join(serverDir(dir, 1), "server.conf"), "utf8")).not.toContain("web-1");
    expect(readFileSync(join(dir, "nodes/web-1.json"), "utf8")).not.toContain(code.value.seed);
    const short = await mesh(dir, ["node", "add", "web-9", "--expires", "30m"]);
    const shortCode = decodeCode(short.stdout);
    if (!shortCode.ok || !("jwt" in shortCode.value)) throw new Error("no v2 code");
    const exp = JSON.parse(Buffer.from(shortCode.value.jwt.split(".")[1]!, "base64url").toString()).exp;
    expect(Math.abs(exp - (Date.now() / 1000 + 1800))).toBeLessThan(120);
    await refused(dir, ["node", "add", "web-8", "--expires", "99d"], /--expires must be from 1m to 30d/);
    await refused(
      dir,
      ["node", "add", "web-8", "--expires", "soon"],
      /--expires must be a number and a unit/,
    );
  });

  it("--code-file writes the code 0600 and prints no token", async () => {
    const base = tempDir();
    const dir = join(base, "m");
    await initMesh(dir, [4996]);
    const file = join(base, "web-2.code");
    const r = await mesh(dir, ["node", "add", "web-2", "--code-file", file]);
    expect(r.code, r.stderr).toBe(0);
    expect(mode(file)).toBe(0o600);
    const code = decodeCode(readFileSync(file, "utf8"));
    if (!code.ok) throw new Error(code.reason);
    expect(r.stdout + r.stderr).not.toContain((code.value as { seed: string }).seed);
    expect(r.stdout).not.toContain("mesh1.");
    await refused(dir, ["node", "add", "web-3", "--code-file", file], /exists: not overwritten/);
  });

  it("refuses a wrong or stale node: one line, exit 2, nothing changed", async () => {
    const dir = join(tempDir(), "m");
    await initMesh(dir, [4995]);
    expect((await mesh(dir, ["node", "add", "web-1"])).code).toBe(0);
    await refused(dir, ["node", "add", "web-1"], /node web-1 is already in this mesh/);
    await refused(dir, ["node", "add", "Web.1"], /node name "Web.1" must match/);
    await refused(dir, ["node", "add"], /a NAME is needed/);
    await refused(dir, ["node", "add", "a", "b"], /takes one NAME/);
    await refused(dir, ["node", "rm", "nobody"], /node nobody is not in this mesh/);
    await refused(dir, ["node", "move", "web-1"], /mesh node takes add or rm/);
    await refused(dir, ["frobnicate"], /unknown mesh command "frobnicate"/);
    await refused(dir, ["nodes", "--bogus"], /unknown flag --bogus/);
    await refused(dir, ["push", "nobody", "/nonexistent.json"], /node nobody is not in this mesh/);
    await refused(dir, ["push", "web-1", "/nonexistent.json"], /node web-1 has not enrolled yet/);
    await refused(dir, ["push", "--all", "/nonexistent.json"], /no node of this mesh has enrolled yet/);
    await refused(dir, ["move", "web-1", "--to", dir], /node web-1 has not enrolled yet/);
    await refused(dir, ["up", "--only", "2"], /--only must be a server from 1 to 1/);
    await refused(dir, ["watch", "extra"], /takes no argument/);
    // the bus is not up: the commands that need it say so
    await refused(
      dir,
      ["watch"],
      /the mesh's bus does not answer at nats:\/\/127\.0\.0\.1:4995 \(is `mesh-host mesh up` running\?\)/,
    );
    await refused(dir, ["up", "--unit", "--unit-dir", join(dir, "nowhere")], /--unit-dir .* does not exist/);
  });

  it("node rm without the bus is refused in one line, nothing changed: a record gone unrevoked would leave its user", async () => {
    const dir = join(tempDir(), "m");
    await initMesh(dir, [4994]);
    expect((await mesh(dir, ["node", "add", "gone"])).code).toBe(0);
    const r = await mesh(dir, ["node", "rm", "gone"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/does not answer .*so nothing could be revoked/);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(new MeshDir(dir).node("gone")).not.toBeNull();
  });
});

describe("mesh up --unit", () => {
  it("writes one systemd unit a server, each running mesh up --only I, and starts nothing", async () => {
    const base = tempDir();
    const dir = join(base, "m");
    expect((await mesh(dir, ["init", "--servers", "3"])).code).toBe(0);
    const units = join(base, "units");
    mkdirSync(units);
    const r = await mesh(dir, ["up", "--unit", "--unit-dir", units]);
    expect(r.code, r.stderr).toBe(0);
    for (const i of [1, 2, 3]) {
      const text = readFileSync(join(units, `mesh-host-mesh-${i}.service`), "utf8");
      expect(text).toContain(`mesh up --mesh ${dir} --only ${i}`);
      expect(text).toContain("Restart=always");
    }
    expect(new MeshDir(dir).config().servers).toHaveLength(3);
  });
});
