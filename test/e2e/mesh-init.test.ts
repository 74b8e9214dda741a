// `mesh init`, the mesh commands without the bus (one line, exit 1: the state is on the bus, never read from a
// stale file), and `node add`/`rm` with it, through the built executable: what init makes and refuses, the code
// and its file, and every wrong or stale input: one line, exit 2, nothing changed.
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accountId, enrolPermissions, MeshDir, nodesAccountId, SHARDS } from "../../src/mesh/index.ts";
import { decodeCode } from "../../src/vocabulary/index.ts";
import { NATS_SERVER } from "../mesh/index.ts";
import { freePortPairs, initMesh, mesh, meshUp, serverDir } from "../mesh/operator.ts";
import { codeRecord, hasNode, nodeRecord } from "../mesh/state.ts";
import { type Running, runCli } from "../support/cli.ts";
import { ensureSea } from "../support/sea.ts";
import { runMarkerEnv } from "../support/strays.ts";
import { snapshot, tempDir } from "../support/tmp.ts";

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);

const mode = (p: string) => statSync(p).mode & 0o777;

/**
 * The mesh directory as a command would change it: not what a running server writes on its own schedule into its
 * JetStream store and its log (an index flushed seconds later is the server's, not the command's).
 */
function meshFiles(dir: string): Record<string, string> {
  return Object.fromEntries(
    Object.entries(snapshot(dir)).filter(
      ([path]) => !/^\/servers\/\d+\/(jetstream\/|[^/]*\.log$)/.test(path),
    ),
  );
}

/** Refused: exit 2, one line on stderr naming what was wrong, nothing on stdout, the directory unchanged. */
async function refused(dir: string, args: string[], says: RegExp, opts: { input?: string } = {}) {
  const before = meshFiles(dir);
  const r = await mesh(dir, args, opts);
  expect(r.code, r.stderr).toBe(2);
  expect(r.stdout).toBe("");
  expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
  expect(r.stderr).toMatch(says);
  expect(meshFiles(dir)).toEqual(before);
  return r;
}

describe("mesh init", () => {
  it("makes a 0700 mesh directory whose server configuration nats-server accepts, no secret on stdout", async () => {
    const base = tempDir();
    const dir = join(base, "m");
    const r = await mesh(dir, ["init", "--server", "127.0.0.1:4999"]);
    expect(r.code, r.stderr).toBe(0);
    expect(mode(dir)).toBe(0o700);
    expect(existsSync(join(dir, "nodes"))).toBe(false);
    for (const f of ["signing.key", "accounts.json", "tls/key.pem", "servers/1/server.conf"])
      expect(mode(join(dir, f)), f).toBe(0o600);
    const m = new MeshDir(dir);
    const config = m.config();
    expect(config.servers).toEqual([{ host: "127.0.0.1", port: 4999 }]);
    expect(r.stdout).toContain(config.fingerprint);
    const seeds = Object.values(JSON.parse(readFileSync(join(dir, "accounts.json"), "utf8")) as object);
    // the operator, SYS, MESH, NODES and ENROL
    expect(seeds).toHaveLength(5);
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
    // the accounts preloaded: ENROL imports the enrolment service and its answers from MESH and nothing else,
    // without JetStream; NODES' and ENROL's claims are older than any a revocation pushes (kept over a restart)
    const keys = m.accountKeys();
    const preloaded = (kind: "nodes" | "enrol") => {
      const line = conf.split("\n").find((l) => l.trim().startsWith(`${accountId(keys, kind)}:`)) ?? "";
      const jwt = JSON.parse(line.slice(line.indexOf(":") + 1).trim()) as string;
      return JSON.parse(Buffer.from(jwt.split(".")[1]!, "base64url").toString());
    };
    const enrol = preloaded("enrol");
    expect(enrol.name).toBe("ENROL");
    expect(enrol.iat).toBe(1);
    expect(
      enrol.nats.imports.map((i: { subject: string; type: string; account: string }) => [
        i.subject,
        i.type,
        i.account,
      ]),
    ).toEqual([
      ["mesh.enrol.*", "service", accountId(keys, "mesh")],
      ["_INBOX.enrol.>", "stream", accountId(keys, "mesh")],
    ]);
    expect(enrol.nats.exports).toBeUndefined();
    expect(enrol.nats.limits).toMatchObject({ imports: 2, exports: 0 });
    expect(enrol.nats.limits.mem_storage ?? 0).toBe(0);
    expect(enrol.nats.limits.disk_storage ?? 0).toBe(0);
    expect(preloaded("nodes")).toMatchObject({ name: "NODES", iat: 1 });
    expect(preloaded("nodes").nats.revocations).toBeUndefined();
    // the shards: each preloaded, older than any revocation, importing what a node reading directly uses and
    // nothing of a consumer's; MESH imports each one's plan service under the shard's own prefix; SYS imports
    // mesh.load, so that MESH and every shard are built at the server's start
    const claimsOfId = (id: string) => {
      const line = conf.split("\n").find((l) => l.trim().startsWith(`${id}:`)) ?? "";
      const jwt = JSON.parse(line.slice(line.indexOf(":") + 1).trim()) as string;
      return JSON.parse(Buffer.from(jwt.split(".")[1]!, "base64url").toString());
    };
    expect(SHARDS).toHaveLength(128);
    const shard = claimsOfId(nodesAccountId(keys, "NODES.7f"));
    expect(shard).toMatchObject({ name: "NODES.7f", iat: 1 });
    // an import heard under another subject, as "subject as local": the wake-up, on the node's own subject
    const imported = (i: { subject: string; local_subject?: string }) =>
      i.local_subject ? `${i.subject} as ${i.local_subject}` : i.subject;
    expect(shard.nats.imports.map(imported).sort()).toEqual([
      "$JS.API.DIRECT.GET.DECLARE.mesh.declare.*",
      "$JS.API.DIRECT.GET.OBJ_mesh-releases",
      "$JS.API.DIRECT.GET.OBJ_mesh-releases.>",
      "$JS.API.INFO",
      "mesh.heartbeat.*",
      "mesh.rekey.*",
      "mesh.report.*",
      "mesh.wake.* as mesh.declare.*",
    ]);
    for (const s of SHARDS) expect(claimsOfId(nodesAccountId(keys, s)).name).toBe(s);
    const meshClaims = claimsOfId(accountId(keys, "mesh"));
    const plans = meshClaims.nats.imports.filter((i: { local_subject?: string }) => i.local_subject);
    expect(plans).toHaveLength(128);
    expect(plans).toContainEqual(
      expect.objectContaining({
        subject: "mesh.plan.*",
        local_subject: "mesh.plan.7f.*",
        account: nodesAccountId(keys, "NODES.7f"),
      }),
    );
    expect(claimsOfId(accountId(keys, "system")).nats.imports).toEqual([
      expect.objectContaining({ subject: "mesh.load", type: "stream", account: accountId(keys, "mesh") }),
    ]);
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

describe("the operator's errors in our words (issue 27, items 14 and 15)", () => {
  it("init without openssl says so, in one line, and makes nothing", async () => {
    const base = tempDir();
    const dir = join(base, "m");
    const noTools = join(base, "bin");
    mkdirSync(noTools);
    const r = await mesh(dir, ["init", "--server", "127.0.0.1:4993"], { env: { PATH: noTools } });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toBe(
      "mesh-host: openssl is not installed, and mesh init makes the bus's certificate with it (Debian: apt install openssl)\n",
    );
    expect(r.stderr).not.toMatch(/ENOENT|spawnSync/);
    expect(readdirSync(base)).toEqual(["bin"]);
  });

  it.runIf(process.getuid?.() === 0)(
    "a mesh another user may not read is permission denied, not 'not a mesh'",
    async () => {
      const base = tempDir();
      chmodSync(base, 0o755);
      const dir = join(base, "m");
      await initMesh(dir, [4992]);
      const r = spawnSync(
        "setpriv",
        [
          "--reuid=65534",
          "--regid=65534",
          "--clear-groups",
          "--",
          process.env.MESH_HOST_BIN!,
          "mesh",
          "--mesh",
          dir,
          "nodes",
        ],
        { encoding: "utf8", env: { PATH: "/usr/bin:/bin", ...runMarkerEnv() } },
      );
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toBe(
        `mesh-host: cannot read ${dir}: permission denied (a mesh directory is its owner's alone: run this as that user)\n`,
      );
    },
  );
});

describe("without the bus: the commands that need the mesh's state say so", () => {
  it("node add, node rm, nodes, push and watch: one line, exit 1, nothing changed, no stale file read", async () => {
    const dir = join(tempDir(), "m");
    await initMesh(dir, [4995]);
    const before = snapshot(dir);
    for (const args of [
      ["node", "add", "web-1"],
      ["node", "rm", "web-1"],
      ["nodes"],
      ["push", "web-1", "/nonexistent.json"],
      ["watch"],
    ]) {
      const r = await mesh(dir, args);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
      expect(r.stderr).toMatch(
        /the mesh's bus does not answer at nats:\/\/127\.0\.0\.1:4995 \(is `mesh-host mesh up` running\?\)/,
      );
    }
    expect(snapshot(dir)).toEqual(before);
    // bad input is still refused before the bus is looked for
    await refused(dir, ["node", "add", "Web.1"], /node name "Web.1" must match/);
    await refused(
      dir,
      ["node", "add", "web-1", "--expires", "forever"],
      /--expires must be a number and s, m, h or d/,
    );
    await refused(dir, ["node", "add", "web-1", "--expires", "31d"], /--expires must be .* to 30d/);
  });
});

describe("mesh node add and rm, with the bus", () => {
  let dir: string;
  let up: Running;
  beforeAll(async () => {
    dir = join(mkdtempSync(join(tmpdir(), "mesh-init-")), "m");
    await initMesh(dir, await freePortPairs(1));
    up = await meshUp(dir);
  }, 300_000);
  afterAll(async () => {
    await up?.stop();
  });

  it("prints the enrolment code and nothing else; the code pins the mesh's certificate", async () => {
    const r = await mesh(dir, ["node", "add", "web-1"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trimEnd().split("\n")).toHaveLength(1);
    const code = decodeCode(r.stdout);
    if (!code.ok) throw new Error(code.reason);
    const config = new MeshDir(dir).config();
    expect(code.value).toMatchObject({
      node: "web-1",
      servers: [new MeshDir(dir).urls()[0]],
      fingerprint: config.fingerprint,
    });
    if (!("jwt" in code.value)) throw new Error("a v1 code");
    const stored = await codeRecord(dir, "web-1");
    // nothing of the node in the mesh directory: its record and code are on the bus
    expect(existsSync(join(dir, "nodes"))).toBe(false);
    const record = await nodeRecord(dir, "web-1");
    // the code's enrolling user: exactly protocol.md's enrolling grants, expiring with the code (24 h)
    const claims = JSON.parse(Buffer.from(code.value.jwt.split(".")[1]!, "base64url").toString()) as {
      sub: string;
      name: string;
      exp: number;
      nats: { pub: { allow: string[] }; sub: { allow: string[] } };
    };
    expect(claims.sub).toBe(record.enrol?.user);
    expect(claims.sub).toBe(stored?.user);
    expect(claims.name).toBe("enrol.web-1");
    expect({ publish: claims.nats.pub, subscribe: claims.nats.sub }).toEqual(enrolPermissions("web-1"));
    expect(Math.abs(claims.exp - (Date.now() / 1000 + 24 * 3600))).toBeLessThan(120);
    expect(Date.parse(record.enrol!.expires_at)).toBe(claims.exp * 1000);
    expect(Date.parse(stored!.expires_at)).toBe(claims.exp * 1000);
    // nothing of the node's reached a server's configuration, nor its seed the bus: no file is rewritten per node
    expect(readFileSync(join(serverDir(dir, 1), "server.conf"), "utf8")).not.toContain("web-1");
    expect(JSON.stringify(stored)).not.toContain(code.value.seed);
    expect(JSON.stringify(record)).not.toContain(code.value.seed);
    const short = await mesh(dir, ["node", "add", "web-9", "--expires", "30m"]);
    const shortCode = decodeCode(short.stdout);
    if (!shortCode.ok || !("jwt" in shortCode.value)) throw new Error("no v2 code");
    const exp = JSON.parse(Buffer.from(shortCode.value.jwt.split(".")[1]!, "base64url").toString()).exp;
    expect(Math.abs(exp - (Date.now() / 1000 + 1800))).toBeLessThan(120);
    await refused(dir, ["node", "add", "web-8", "--expires", "99d"], /--expires must be a number/);
  });

  it("--code-file writes the code 0600 and prints no token; --expires sets the code's expiry", async () => {
    const file = join(dirname(dir), "web-2.code");
    const r = await mesh(dir, ["node", "add", "web-2", "--code-file", file, "--expires", "90m"]);
    expect(r.code, r.stderr).toBe(0);
    expect(mode(file)).toBe(0o600);
    const code = decodeCode(readFileSync(file, "utf8"));
    if (!code.ok) throw new Error(code.reason);
    expect(r.stdout + r.stderr).not.toContain((code.value as { seed: string }).seed);
    expect(r.stdout).not.toContain("mesh1.");
    const left = Date.parse((await codeRecord(dir, "web-2"))!.expires_at) - Date.now();
    expect(left).toBeGreaterThan(80 * 60_000);
    expect(left).toBeLessThanOrEqual(90 * 60_000);
    await refused(dir, ["node", "add", "web-3", "--code-file", file], /exists: not overwritten/);
  });

  it("refuses a wrong or stale node: one line, exit 2, nothing changed", async () => {
    expect((await mesh(dir, ["node", "add", "web-4"])).code).toBe(0);
    await refused(dir, ["node", "add", "web-4"], /node web-4 is already in this mesh/);
    await refused(dir, ["node", "add", "Web.1"], /node name "Web.1" must match/);
    await refused(dir, ["node", "add"], /a NAME is needed/);
    await refused(dir, ["node", "add", "a", "b"], /takes one NAME/);
    await refused(dir, ["node", "rm", "nobody"], /node nobody is not in this mesh/);
    await refused(dir, ["node", "move", "web-4"], /mesh node takes add or rm or reissue/);
    await refused(dir, ["frobnicate"], /unknown mesh command "frobnicate"/);
    await refused(dir, ["nodes", "--bogus"], /unknown flag --bogus/);
    await refused(dir, ["push", "web-4"], /mesh push web-4 needs FILE after it, the declaration to push/);
    await refused(dir, ["push", "nobody", "/nonexistent.json"], /node nobody is not in this mesh/);
    await refused(dir, ["push", "web-4", "/nonexistent.json"], /node web-4 has not enrolled yet/);
    await refused(dir, ["move", "web-4", "--to", dir], /node web-4 has not enrolled yet/);
    await refused(dir, ["up", "--only", "2"], /--only must be a server from 1 to 1/);
    await refused(dir, ["watch", "extra"], /takes no argument/);
    await refused(dir, ["up", "--unit", "--unit-dir", join(dir, "nowhere")], /--unit-dir .* does not exist/);
  });

  it("refuses an enrolment with a code past its --expires", async () => {
    const added = await mesh(dir, ["node", "add", "late", "--expires", "1s"]);
    expect(added.code, added.stderr).toBe(0);
    const expires = Date.parse((await codeRecord(dir, "late"))!.expires_at);
    while (Date.now() <= expires + 1000) await new Promise((r) => setTimeout(r, 100));
    const base = dirname(dir);
    mkdirSync(join(base, "late-root"));
    const enrol = await runCli(
      ["enrol", "--state", join(base, "late-state"), "--root", join(base, "late-root")],
      {
        input: added.stdout,
      },
    );
    // refused by the bus: the enrolling user's JWT expired with the code (the controller's record says the same)
    expect(enrol.code, enrol.stderr).toBe(2);
    expect(enrol.stderr).toMatch(/refused enrol\.late's credentials: .*expired|node late's code expired at /);
    expect((await nodeRecord(dir, "late")).keys).toBeNull();
  });

  it("node rm revokes the node and takes its record and code away", async () => {
    expect((await mesh(dir, ["node", "add", "gone"])).code).toBe(0);
    const r = await mesh(dir, ["node", "rm", "gone"]);
    expect(r.code, r.stderr).toBe(0);
    expect(await hasNode(dir, "gone")).toBe(false);
    expect(await codeRecord(dir, "gone")).toBeNull();
    expect(readFileSync(join(serverDir(dir, 1), "server.conf"), "utf8")).not.toMatch(/gone/);
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
