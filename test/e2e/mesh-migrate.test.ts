// `mesh migrate`, through the built executable against a real nats-server: a mesh directory of format 1 (its
// nodes in nodes/*.json, its fleet view in fleet.json, as the mesh-host before the buckets wrote them) is refused
// by every other command with one line naming migrate, moved onto the bus by migrate (servers started for it),
// and read from the bus after; a directory migrate cannot read is refused with nothing changed, and so is one the
// password bus made (its nodes hold passwords the keyed bus has no place for): every command, migrate too, says so.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { freePortPairs, initMesh, mesh, meshUp } from "../mesh/operator.ts";
import { codeRecord, nodeRecord } from "../mesh/state.ts";
import type { Running } from "../support/cli.ts";
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

/** A mesh directory as format 1 left it: made by init, then marked format 1 with its node files beside. */
async function formatOne(): Promise<string> {
  const dir = join(tempDir(), "m");
  await initMesh(dir, await freePortPairs(1));
  const config = JSON.parse(readFileSync(join(dir, "mesh.json"), "utf8"));
  writeFileSync(join(dir, "mesh.json"), JSON.stringify({ ...config, format: 1 }, null, 2));
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
    expect(r.stdout).toMatch(/migrated .* to format 2: 2 node\(s\), 1 code\(s\), 1 fleet entr\(ies\)/);
    // no seed of the accounts in what it says
    const seeds = Object.values(
      JSON.parse(readFileSync(join(dir, "accounts.json"), "utf8")) as Record<string, string>,
    );
    for (const secret of seeds) expect(r.stdout + r.stderr).not.toContain(secret);
    expect(JSON.parse(readFileSync(join(dir, "mesh.json"), "utf8")).format).toBe(2);
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
    expect(again.stderr).toMatch(/is format 2 already: nothing to migrate/);
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
