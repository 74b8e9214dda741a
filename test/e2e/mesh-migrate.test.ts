// `mesh migrate`, through the built executable against a real nats-server: a mesh directory of format 1 (its
// nodes in nodes/*.json, its fleet view in fleet.json, as the mesh-host before the buckets wrote them) is refused
// by every other command with one line naming migrate, moved onto the bus by migrate (servers started for it),
// and read from the bus after; a directory migrate cannot read is refused with nothing changed, and so is one the
// password bus made (its nodes hold passwords the keyed bus has no place for): every command, migrate too, says so.
import { generateKeyPairSync, sign } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { ENROL_MAX_PAYLOAD, ENROL_MAX_SUBS } from "../../src/defaults.ts";
import {
  type AccountKeys,
  accountId,
  codeOf,
  enrolPermissions,
  enrolUserJwt,
  MeshDir,
  withState,
} from "../../src/mesh/index.ts";
import { issueJwt } from "../../src/mesh/jwt.ts";
import { newRecord } from "../../src/mesh/nodes.ts";
import { enrolUser, nkeyOf, seedOf } from "../../src/vocabulary/index.ts";
import { askEnrol, codeUser, dialWithCode, heldClaims, heldRevocations } from "../mesh/enrolling.ts";
import { addNode } from "../mesh/fleet.ts";
import { EVENT_WAIT_MS, waitFor } from "../mesh/index.ts";
import { freePortPairs, initMesh, mesh, meshUp } from "../mesh/operator.ts";
import { NATS_SERVER } from "../mesh/server.ts";
import { codeRecord, nodeRecord } from "../mesh/state.ts";
import type { Running } from "../support/cli.ts";
import { spawnGroup } from "../support/processes.ts";
import { ensureSea } from "../support/sea.ts";
import { snapshot, tempDir } from "../support/tmp.ts";

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);

const started: Running[] = [];
afterEach(async () => {
  while (started.length) await started.pop()!.stop();
});

const KEY = (c: string) => `${c.repeat(43)}=`;
/** The enrolling user of web-1's unspent code. */
const ENROL_USER = `U${"E".repeat(55)}`;

/** A node's file exactly as format 1 wrote it. */
function nodeFileV1(node: string, enrolled: boolean): object {
  return {
    format: 1,
    node,
    enrol: enrolled ? null : { user: ENROL_USER, expires_at: "2099-01-01T00:00:00.000Z" },
    added_at: "2026-11-01T10:00:00.000Z",
    enrolled_at: enrolled ? "2026-11-01T10:01:00.000Z" : null,
    keys: enrolled ? { identity: KEY("A"), sealing: KEY("B"), overlay: KEY("C") } : null,
    facts: enrolled ? { os: "linux", arch: "x64", hostname: node, version: "0.1.0" } : null,
    serial: enrolled ? 3 : 0,
    pushes: enrolled ? [{ serial: 3, digest: "sha256:abc", seq: 7, at: "2026-11-02T10:00:00.000Z" }] : [],
    last_body: enrolled ? { v: 1, mode: "converged", resources: [] } : null,
    moved_to: null,
  };
}

/** A mesh directory as format 1 left it: made by init, without ENROL, marked format 1 with its node files beside. */
async function formatOne(): Promise<string> {
  const dir = join(tempDir(), "m");
  await initMesh(dir, await freePortPairs(1));
  withoutEnrol(dir, 1);
  mkdirSync(join(dir, "nodes"), { mode: 0o700 });
  for (const [node, enrolled] of [
    ["web-1", false],
    ["web-2", true],
  ] as const)
    writeFileSync(join(dir, "nodes", `${node}.json`), JSON.stringify(nodeFileV1(node, enrolled)), {
      mode: 0o600,
    });
  const heartbeat = { at: "2026-11-03T10:00:00.000Z", version: "0.1.0", uptime_s: 9, confirmed: true };
  writeFileSync(
    join(dir, "fleet.json"),
    JSON.stringify({ format: 1, nodes: { "web-2": { heartbeat, report: null } } }),
  );
  return dir;
}

describe("mesh migrate", () => {
  it("is asked for by every other command, moves the records onto the bus, and the mesh reads them there", async () => {
    const dir = await formatOne();
    for (const args of [["nodes"], ["up"], ["node", "add", "web-3"], ["push", "web-2", "x.json"]]) {
      const r = await mesh(dir, args);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/keeps its nodes in files \(format 1\): run `mesh-host mesh migrate` once/);
    }
    const r = await mesh(dir, ["migrate"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/migrated .* to format 3: 2 node\(s\), 1 code\(s\), 1 fleet entr\(ies\)/);
    // no seed of the accounts in what it says
    const seeds = Object.values(
      JSON.parse(readFileSync(join(dir, "accounts.json"), "utf8")) as Record<string, string>,
    );
    for (const secret of seeds) expect(r.stdout + r.stderr).not.toContain(secret);
    expect(JSON.parse(readFileSync(join(dir, "mesh.json"), "utf8")).format).toBe(3);
    // enrolling users have their own account from now on
    expect(JSON.parse(readFileSync(join(dir, "accounts.json"), "utf8")).enrol).toMatch(/^SA/);
    expect(existsSync(join(dir, "nodes"))).toBe(false);
    expect(existsSync(join(dir, "fleet.json"))).toBe(false);
    expect(existsSync(join(dir, "migrated-v1", "nodes", "web-2.json"))).toBe(true);
    // the servers it started for itself are stopped again: `up` runs them now
    started.push(await meshUp(dir));
    const web2 = await nodeRecord(dir, "web-2");
    expect(web2).toMatchObject({ format: 2, serial: 3, labels: {}, keys: { identity: KEY("A") } });
    expect((await codeRecord(dir, "web-1"))?.user).toBe(ENROL_USER);
    expect(await codeRecord(dir, "web-2")).toBeNull();
    const nodes = JSON.parse((await mesh(dir, ["nodes", "--json"])).stdout).nodes;
    expect(nodes.map((n: { node: string }) => n.node).sort()).toEqual(["web-1", "web-2"]);
    expect(nodes.find((n: { node: string }) => n.node === "web-2")).toMatchObject({
      enrolled: true,
      version: "0.1.0",
    });
    const again = await mesh(dir, ["migrate"]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/is format 3 already: nothing to migrate/);
  });

  it("refuses a directory with a node file it cannot read as format 1, in one line, changing nothing", async () => {
    const dir = await formatOne();
    writeFileSync(
      join(dir, "nodes", "web-3.json"),
      JSON.stringify({ ...nodeFileV1("web-3", false), serial: -1 }),
    );
    const before = snapshot(dir);
    const r = await mesh(dir, ["migrate"]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(/nodes\/web-3\.json is not one this version of mesh-host reads \(at serial\)/);
    expect(snapshot(dir)).toEqual(before);
  });

  it("refuses a directory of the password bus (no accounts.json, a user list) in one line from every command, migrate too", async () => {
    const dir = await passwordBus();
    const before = snapshot(dir);
    for (const args of [["nodes"], ["up"], ["node", "add", "web-3"], ["node", "rm", "web-1"], ["migrate"]]) {
      const r = await mesh(dir, args);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(2);
      expect(r.stderr.trimEnd().split("\n"), args.join(" ")).toHaveLength(1);
      expect(r.stderr, args.join(" ")).toMatch(
        /was made by an older mesh-host whose bus took passwords \(it has no accounts\.json\).*make a new mesh with `mesh-host mesh init`/,
      );
      expect(r.stdout + r.stderr).not.toContain(PASSWORD);
    }
    expect(snapshot(dir)).toEqual(before);
  });
});

/** Make `dir` (made by this init) what an older one was: no ENROL seed in accounts.json, mesh.json of `format`. */
function withoutEnrol(dir: string, format: 1 | 2): void {
  const { enrol: _gone, ...seeds } = JSON.parse(readFileSync(join(dir, "accounts.json"), "utf8"));
  writeFileSync(join(dir, "accounts.json"), JSON.stringify(seeds), { mode: 0o600 });
  const config = JSON.parse(readFileSync(join(dir, "mesh.json"), "utf8"));
  writeFileSync(join(dir, "mesh.json"), JSON.stringify({ ...config, format }, null, 2));
}

/**
 * A code as format 2 issued it (its enrolling user NODES', signed by NODES' key, its record naming no account):
 * its node's record, its code and consumer on the bus.
 */
async function formatTwoCode(dir: string, keys: AccountKeys, node: string): Promise<string> {
  const pair = generateKeyPairSync("ed25519");
  const user = nkeyOf("user", pair.publicKey);
  const now = new Date();
  const exp = Math.floor(now.getTime() / 1000) + 3600;
  const permissions = enrolPermissions(node);
  const jwt = issueJwt(
    {
      name: enrolUser(node),
      sub: user,
      exp,
      nats: {
        type: "user",
        pub: { allow: permissions.publish.allow },
        sub: { allow: permissions.subscribe.allow },
        subs: ENROL_MAX_SUBS,
        payload: ENROL_MAX_PAYLOAD,
        data: -1,
      },
    },
    keys.nodes.privateKey,
    "account",
  );
  const expires_at = new Date(exp * 1000).toISOString();
  const mesh = new MeshDir(dir);
  await withState(mesh, async (state) => {
    await state.nodes.create(node, { ...newRecord(node, now), enrol: { user, expires_at } });
    await state.codes.put(node, { node, user, added_at: now.toISOString(), expires_at, spent: null });
  });
  return codeOf(mesh, node, { jwt, seed: seedOf("user", pair.privateKey) });
}

/** Server 1 as format 2 ran it: its configuration without ENROL, its resolver never told of it. */
async function formatTwoServer(dir: string, keys: AccountKeys): Promise<{ stop(): Promise<void> }> {
  const enrol = accountId(keys, "enrol");
  rmSync(join(dir, "servers/1/jwt", `${enrol}.jwt`), { force: true });
  const conf = join(dir, "servers/1/server.conf");
  const lines = readFileSync(conf, "utf8").split("\n");
  writeFileSync(conf, lines.filter((l) => !l.includes(enrol)).join("\n"));
  const log = join(dir, "servers/1/server.log");
  const from = existsSync(log) ? readFileSync(log, "utf8").length : 0;
  const child = spawnGroup(NATS_SERVER, ["-c", conf], { stdio: "ignore" });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  await waitFor(
    () => existsSync(log) && readFileSync(log, "utf8").slice(from).includes("Server is ready"),
    EVENT_WAIT_MS,
    "the format-2 server to be ready",
  );
  return {
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

describe("a directory of format 2 (enrolling users NODES')", () => {
  it("is refused by every command until migrated; migrate makes ENROL on the running bus; codes of before and after enrol", async () => {
    const dir = join(tempDir(), "m");
    await initMesh(dir, await freePortPairs(1));
    const keys = new MeshDir(dir).accountKeys();
    const first = await meshUp(dir);
    const before = await formatTwoCode(dir, keys, "old-1");
    await first.stop();
    withoutEnrol(dir, 2);
    const unchanged = snapshot(dir);
    for (const args of [
      ["nodes"],
      ["up"],
      ["node", "add", "web-3"],
      ["node", "rm", "old-1"],
      ["node", "reissue", "old-1"],
    ]) {
      const r = await mesh(dir, args);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(2);
      expect(r.stderr.trimEnd().split("\n"), args.join(" ")).toHaveLength(1);
      expect(r.stderr, args.join(" ")).toMatch(
        /was made before enrolling users had an account of their own \(format 2\): run `mesh-host mesh migrate` once/,
      );
    }
    expect(snapshot(dir)).toEqual(unchanged);
    // its bus running as format 2 ran it: migrate pushes ENROL's claims to it, and it takes them at once
    const server = await formatTwoServer(dir, keys);
    try {
      const r = await mesh(dir, ["migrate"]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/migrated .* from format 2 to format 3: enrolling users in their own account/);
      const seeds = JSON.parse(readFileSync(join(dir, "accounts.json"), "utf8")) as Record<string, string>;
      for (const secret of Object.values(seeds)) expect(r.stdout + r.stderr).not.toContain(secret);
      expect(seeds.enrol).toMatch(/^SA/);
      expect(JSON.parse(readFileSync(join(dir, "mesh.json"), "utf8")).format).toBe(3);
      const migrated = new MeshDir(dir).accountKeys();
      expect(accountId(migrated, "nodes")).toBe(accountId(keys, "nodes"));
      expect(heldClaims(dir, "ENROL")?.name).toBe("ENROL");
      // a user of the new account signs in to the server that was never restarted
      const pair = generateKeyPairSync("ed25519");
      const user = nkeyOf("user", pair.publicKey);
      const jwt = enrolUserJwt(migrated, "probe", user, Math.floor(Date.now() / 1000) + 60);
      const nc = await connect({
        servers: new MeshDir(dir).urls(),
        tls: { ca: new MeshDir(dir).certPem() },
        authenticator: (nonce?: string) => ({
          jwt,
          nkey: user,
          sig: sign(null, Buffer.from(nonce ?? ""), pair.privateKey).toString("base64url"),
        }),
      });
      await nc.close();
    } finally {
      await server.stop();
    }
    const again = await mesh(dir, ["migrate"]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/is format 3 already: nothing to migrate/);
    started.push(await meshUp(dir));
    // the code issued before still enrols, and is revoked where its user is, in NODES (to its expiry)
    const old = codeUser(before);
    expect(old.issuer).toBe(accountId(keys, "nodes"));
    expect(await askEnrol(before)).toBe("ok");
    await waitFor(
      () => (heldRevocations(dir, "NODES")[old.user] ?? 0) >= old.exp,
      EVENT_WAIT_MS,
      "NODES to revoke the spent code of before",
    );
    await expect(dialWithCode(dir, before)).rejects.toThrow(/authentication|authorization/i);
    // a code issued now is ENROL's, and enrols
    const now = await addNode(dir, "new-1");
    expect(codeUser(now).issuer).toBe(accountId(new MeshDir(dir).accountKeys(), "enrol"));
    expect(await askEnrol(now)).toBe("ok");
  }, 600_000);
});

const PASSWORD = "pw-controller-7Hk2";

/** A mesh directory as the password bus left it: format 2, secrets.json with the passwords, each server's users. */
async function passwordBus(): Promise<string> {
  const dir = join(tempDir(), "m");
  await initMesh(dir, await freePortPairs(1));
  rmSync(join(dir, "accounts.json"));
  writeFileSync(join(dir, "secrets.json"), JSON.stringify({ controller: PASSWORD, route: "pw-route" }), {
    mode: 0o600,
  });
  writeFileSync(
    join(dir, "servers", "1", "users.conf"),
    `authorization { users: [ { user: "mesh", password: "${PASSWORD}" } ] }\n`,
    { mode: 0o600 },
  );
  return dir;
}
