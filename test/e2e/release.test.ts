// Releases carried on the bus (issue 31): `mesh release add|ls|rm` through the built executable against a real
// mesh (`mesh init`, `mesh up`), and nodes installed from a throwaway root, each under the real launcher with a
// restart loop standing in for systemd, upgraded by a declaration naming the release: fetched by direct gets,
// verified, swapped in, confirmed; a release that cannot start rolled back; a corrupted object and a wrong
// signature refused with nothing replaced; a fetch cut by a server restart resumed.
import { spawnSync } from "node:child_process";
import { createHash, type KeyObject } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { releaseSource } from "../../src/link/index.ts";
import { connectBus, MeshDir } from "../../src/mesh/index.ts";
import {
  makeMeshKey,
  ObjectMeta,
  RELEASE_STREAM,
  type Report,
  releaseChunkSubject,
  releaseMetaSubject,
  signManifest,
  verifyManifest,
} from "../../src/vocabulary/index.ts";
import { confirmedOf, type LaunchedNode, TestMesh } from "../mesh/fleet.ts";
import { EVENT_WAIT_MS, waitFor } from "../mesh/index.ts";
import { mesh, meshUp } from "../mesh/operator.ts";
import { asNodeOf } from "../mesh/state.ts";
import type { Running } from "../support/cli.ts";
import { ensureSea, seaVariant } from "../support/sea.ts";

const sha = (p: string) => createHash("sha256").update(readFileSync(p)).digest("hex");
const LOOP_ARGS = ["--heartbeat-s", "1", "--redial-spread-s", "1", "--drift-s", "600"];
const WAIT = ["--wait-s", "300"];

let m: TestMesh;
let base: string;
let dir: string;
let up: Running;

beforeAll(async () => {
  process.env.MESH_HOST_BIN ??= ensureSea();
  m = await TestMesh.start("mesh-release-");
  ({ base, dir, up } = m);
}, 600_000);
afterAll(async () => {
  await m?.stop();
});

type Node = LaunchedNode;

/** A node as a package installs it: its own copy of the executable, enrolled, run by the launcher; confirmed. */
const launchedNode = (name: string): Promise<Node> => m.launched(name, LOOP_ARGS);

const confirmed = confirmedOf;
const confirmedAs = (state: string, digest: string, what: string) =>
  waitFor(() => confirmed(state) === digest, EVENT_WAIT_MS, what);

function declaration(base: string, name: string, release: string, content: string): string {
  const file = join(base, `${name}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      v: 1,
      mode: "converged",
      host: { release },
      resources: [{ id: "conf", type: "file", path: "/etc/app.conf", content }],
    }),
  );
  return file;
}

/** Every report a node has sent, from the REPORTS stream. */
async function reportsOf(node: string): Promise<Report[]> {
  const bus = await connectBus(new MeshDir(dir));
  try {
    const info = await bus.jsm.streams.info("REPORTS");
    const out: Report[] = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
      const m = await bus.jsm.streams.getMessage("REPORTS", { seq }).catch(() => null);
      // a signed node message: the report is its body
      if (m?.subject === `mesh.report.${node}`)
        out.push(JSON.parse(m.json<{ body: string }>().body) as Report);
    }
    return out;
  } finally {
    await bus.close();
  }
}

/** Files a swap could leave beside the binary: none but the binary itself. */
const besideBinary = (n: Node) => readdirSync(dirname(n.bin));

describe("mesh release add, ls, rm", () => {
  it("refuses what is not a release in one line, exit 2, storing nothing", async () => {
    const text = join(base, "notes.txt");
    writeFileSync(text, "hello\n");
    for (const [args, words] of [
      [["release", "add", join(base, "missing")], /cannot be read \(ENOENT\)/],
      [["release", "add", text, "--version", "1.0.0"], /neither an executable \(ELF\) nor an Arch package/],
      [["release", "add", "/bin/true"], /does not say its version: give it with --version V/],
      [["release", "add", "/bin/true", "--version", "1 0"], /--version "1 0" must be a version/],
      [["release", "add", "/bin/true", "--version", "1.0.0", "--host", "bsd"], /--host must be linux/],
      [["release", "rm", "9.9.9"], /no release 9\.9\.9 is stored/],
      [["release", "frob"], /mesh release takes add or ls or rm, not "frob"/],
    ] as [string[], RegExp][]) {
      const r = await mesh(dir, args);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(2);
      expect(r.stderr.trim().split("\n"), args.join(" ")).toHaveLength(1);
      expect(r.stderr).toMatch(words);
    }
    const ls = await mesh(dir, ["release", "ls", "--json"]);
    expect(JSON.parse(ls.stdout).releases).toEqual([]);
  });

  it("stores an executable compressed with its signed manifest; ls shows it; a second add is refused; rm removes it", async () => {
    const v = seaVariant(join(base, "mesh-host-0.0.9-linux-x64"), "0.0.9");
    const added = await mesh(dir, ["release", "add", v]);
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toMatch(/^stored release 0\.0\.9 for linux\/x64: .* zstd /);
    const ls = await mesh(dir, ["release", "ls", "--json"]);
    const [row] = JSON.parse(ls.stdout).releases;
    expect(row.name).toBe("0.0.9/linux/x64");
    expect(row.manifest).toMatchObject({
      version: "0.0.9",
      kind: "linux",
      arch: "x64",
      sha256: sha(v),
      encoding: "zstd",
    });
    expect(row.stored).toBeLessThan(row.manifest.size / 2);
    const again = await mesh(dir, ["release", "add", v]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/release 0\.0\.9\/linux\/x64 is stored already/);
    // the mesh's signing key and the accounts' seeds never reach what the release commands print
    const seeds = Object.values(
      JSON.parse(readFileSync(join(dir, "accounts.json"), "utf8")) as Record<string, string>,
    );
    const secrets = [readFileSync(join(dir, "signing.key"), "utf8").split("\n")[1]!, ...seeds];
    for (const out of [added, ls, again])
      for (const secret of secrets) expect(out.stdout + out.stderr).not.toContain(secret);
    const rm = await mesh(dir, ["release", "rm", "0.0.9"]);
    expect(rm.code, rm.stderr).toBe(0);
    expect(JSON.parse((await mesh(dir, ["release", "ls", "--json"])).stdout).releases).toEqual([]);
  });
});

describe("a node upgraded by a declaration naming its release, under the launcher", () => {
  let nodes: Node[];
  beforeAll(async () => {
    nodes = [await launchedNode("up-1"), await launchedNode("up-2")];
  }, 600_000);

  it("a good release: fetched, verified, swapped in, exits 0, the launcher starts it and it confirms", async () => {
    const v2 = seaVariant(join(base, "mesh-host-0.2.0-linux-x64"), "0.2.0");
    expect((await mesh(dir, ["release", "add", v2])).code).toBe(0);
    const pushed = await mesh(dir, [
      "push",
      "up-1",
      "up-2",
      declaration(base, "good", "0.2.0", "v2\n"),
      ...WAIT,
    ]);
    expect(pushed.code, pushed.stdout + pushed.stderr).toBe(0);
    expect(pushed.stdout).toMatch(/release 0\.2\.0 installed: restarting onto it/);
    for (const n of nodes) {
      await confirmedAs(n.state, sha(v2), `${n.name} on 0.2.0, confirmed`);
      expect(sha(n.bin)).toBe(sha(v2));
      expect(n.loop.exits[0]).toBe(0);
      expect(besideBinary(n)).toEqual(["mesh-host"]);
      expect(readdirSync(join(n.state, "release"))).toEqual([]);
    }
    // on it now: a later declaration naming it applies, the release step unchanged, nothing fetched again
    const again = await mesh(dir, [
      "push",
      "up-1",
      declaration(base, "good2", "0.2.0", "v2 again\n"),
      ...WAIT,
    ]);
    expect(again.code, again.stdout + again.stderr).toBe(0);
    const last = (await reportsOf("up-1")).at(-1)!;
    expect(last.steps.find((s) => s.id === "host.release")).toMatchObject({
      did: "unchanged",
      detail: "release 0.2.0 is installed",
    });
    expect(readFileSync(join(nodes[0]!.root, "etc/app.conf"), "utf8")).toBe("v2 again\n");
  });

  it("a node's own credentials (what its state directory holds) read releases by direct get, and nothing more", async () => {
    const nc = await asNodeOf(nodes[0]!.state, nodes[0]!.name);
    try {
      const meta = await releaseSource(nc).meta("0.2.0/linux/x64");
      expect(meta?.name).toBe("0.2.0/linux/x64");
      const js = jetstream(nc);
      const jsm = await jetstreamManager(nc, { checkAPI: false });
      await expect(js.publish(releaseChunkSubject(meta!.nuid), "evil", { timeout: 2000 })).rejects.toThrow(
        /Permissions Violation for Publish to "\$O\.mesh-releases\.C\./,
      );
      await expect(jsm.streams.purge(RELEASE_STREAM)).rejects.toThrow(/Permissions Violation/);
      await expect(
        jsm.consumers.add(RELEASE_STREAM, { name: "evil", ack_policy: AckPolicy.None }),
      ).rejects.toThrow(/Permissions Violation/);
    } finally {
      await nc.close();
    }
    const ls = await mesh(dir, ["release", "ls", "--json"]);
    expect(JSON.parse(ls.stdout).releases.map((r: { name: string }) => r.name)).toContain("0.2.0/linux/x64");
  });

  it("a release that exits 1 at start: installed, three failed starts, rolled back once, and the next report says so", async () => {
    const n = nodes[0]!;
    const before = sha(n.bin);
    // an executable that cannot start: /bin/false is one, for this processor
    expect((await mesh(dir, ["release", "add", "/bin/false", "--version", "0.3.0"])).code).toBe(0);
    const pushed = await mesh(dir, ["push", n.name, declaration(base, "bad", "0.3.0", "v3\n"), ...WAIT]);
    expect(pushed.code, pushed.stdout + pushed.stderr).toBe(0);
    const note = `rolled back from ${sha("/bin/false")} to ${before} after 3 failed starts`;
    await waitFor(() => n.loop.log.includes(note), EVENT_WAIT_MS, "the launcher's rollback");
    let noted: Report | undefined;
    const deadline = Date.now() + EVENT_WAIT_MS;
    while (!noted && Date.now() < deadline) {
      noted = (await reportsOf(n.name)).find((r) => r.notes?.includes(note));
      if (!noted) await new Promise((r) => setTimeout(r, 500));
    }
    expect(noted, "a report carrying the rollback note").toBeDefined();
    await confirmedAs(n.state, before, "the rolled-back binary confirmed again");
    // it stays there: the release it rolled back from is installed, and is not fetched or swapped in again
    const starts = n.loop.starts;
    await new Promise((r) => setTimeout(r, 5_000));
    expect(n.loop.starts).toBe(starts);
    expect(n.loop.exits.filter((e) => e === 1)).toHaveLength(3);
  });

  it("a corrupted object, a wrong signature, no room on the disk and no such release are refused, the step failed, nothing replaced", async () => {
    const n = nodes[1]!;
    const before = sha(n.bin);
    const v4 = seaVariant(join(base, "mesh-host-0.4.0-linux-x64"), "0.4.0");
    expect((await mesh(dir, ["release", "add", v4])).code).toBe(0);
    await tamper("0.4.0/linux/x64", "0.5.0/linux/x64", "0.5.1/linux/x64");
    const corrupt = await mesh(dir, ["push", n.name, declaration(base, "corrupt", "0.4.0", "v4\n"), ...WAIT]);
    expect(corrupt.code).toBe(1);
    expect(corrupt.stdout).toMatch(
      /release 0\.4\.0 refused: the object's SHA-256 is not its signed manifest's/,
    );
    const forged = await mesh(dir, ["push", n.name, declaration(base, "forged", "0.5.0", "v5\n"), ...WAIT]);
    expect(forged.code).toBe(1);
    expect(forged.stdout).toMatch(
      /release 0\.5\.0\/linux\/x64 refused: the release's manifest is not signed by the mesh key/,
    );
    const absent = await mesh(dir, ["push", n.name, declaration(base, "absent", "9.9.9", "v9\n"), ...WAIT]);
    expect(absent.code).toBe(1);
    expect(absent.stdout).toMatch(/release 9\.9\.9\/linux\/x64 is not in the mesh's releases/);
    const huge = await mesh(dir, ["push", n.name, declaration(base, "huge", "0.5.1", "v5.1\n"), ...WAIT]);
    expect(huge.code).toBe(1);
    expect(huge.stdout).toMatch(
      /release 0\.5\.1 not fetched: no room on the disk of .*: \d+\.\d MiB needed, [\d.]+ MiB free/,
    );
    expect(sha(n.bin)).toBe(before);
    expect(confirmed(n.state)).toBe(before);
    expect(besideBinary(n)).toEqual(["mesh-host"]);
    expect(readdirSync(join(n.state, "release"))).toEqual([]);
  });
});

describe("SIGKILL at each step of an upgrade", () => {
  /** Where the upgrade stands, read from the files it leaves: the first that holds names the step. */
  function stepOf(n: Node, oldIno: number, starts: number): string | null {
    const releaseDir = join(n.state, "release");
    const beside = readdirSync(dirname(n.bin)).filter((f) => f !== "mesh-host");
    if (statSync(n.bin).ino !== oldIno) return n.loop.starts > starts ? "first start" : "exiting";
    if (beside.length) return "unpacking";
    const fetched = existsSync(releaseDir) ? readdirSync(releaseDir) : [];
    return fetched.some((f) => f.endsWith(".part")) ? "fetching" : null;
  }

  it.each(["fetching", "unpacking", "exiting", "first start"])(
    "killed while %s: the old release or the new one is installed, never neither, and it ends on the new, confirmed",
    async (step) => {
      const name = `kill-${step.replace(" ", "-")}`;
      const n = await launchedNode(name);
      const old = sha(n.bin);
      const version = `0.7.${["fetching", "unpacking", "exiting", "first start"].indexOf(step)}`;
      const next = seaVariant(join(base, `mesh-host-${version}-linux-x64`), version);
      expect((await mesh(dir, ["release", "add", next])).code).toBe(0);
      const oldIno = statSync(n.bin).ino;
      const starts = n.loop.starts;
      const sent = await mesh(dir, [
        "push",
        name,
        declaration(base, name, version, `${step}\n`),
        "--wait-s",
        "0",
      ]);
      expect(sent.code, sent.stderr).toBe(0);
      // polled, not slept on: the kill lands at the first sight of the step (or of a later one on a fast machine)
      let seen: string | null = null;
      const deadline = Date.now() + EVENT_WAIT_MS;
      const order = ["fetching", "unpacking", "exiting", "first start"];
      while (Date.now() < deadline) {
        seen = stepOf(n, oldIno, starts);
        if (seen && order.indexOf(seen) >= order.indexOf(step)) break;
        await new Promise((r) => setTimeout(r, 2));
      }
      expect(seen, "the upgrade under way").not.toBeNull();
      expect(n.loop.kill(), `a host to kill ${step}`).toBe(true);
      expect([old, sha(next)], `the binary installed when killed ${seen}`).toContain(sha(n.bin));
      await confirmedAs(n.state, sha(next), `on ${version} after a kill while ${seen}`);
      expect(n.loop.exits).toContain("SIGKILL");
      expect(besideBinary(n)).toEqual(["mesh-host"]);
      // a kill after the swap leaves the fetch behind: the release, now installed, clears it on its first link
      await waitFor(
        () => readdirSync(join(n.state, "release")).length === 0,
        EVENT_WAIT_MS,
        "the fetch cleared",
      );
    },
  );
});

// last: `mesh up` restarted here, which nothing after it should have to wait out
describe("a fetch cut by a server restart", () => {
  it("resumes from where it stood once the link is back, and the release is installed and confirmed", async () => {
    const n = await launchedNode("cut-1");
    const v6 = seaVariant(join(base, "mesh-host-0.6.0-linux-x64"), "0.6.0");
    expect((await mesh(dir, ["release", "add", v6])).code).toBe(0);
    const sent = await mesh(dir, [
      "push",
      n.name,
      declaration(base, "cut", "0.6.0", "v6\n"),
      "--wait-s",
      "0",
    ]);
    expect(sent.code, sent.stderr).toBe(0);
    const releaseDir = join(n.state, "release");
    const partSize = () => {
      const part = readdirSync(releaseDir, { withFileTypes: true }).find((e) => e.name.endsWith(".part"));
      return part ? statSync(join(releaseDir, part.name)).size : 0;
    };
    await waitFor(() => existsSync(releaseDir) && partSize() > 0, EVENT_WAIT_MS, "the fetch under way");
    // the server stops answering mid-fetch, then is gone: the fetch is cut where it stood
    const server = Number(
      spawnSync("pgrep", ["-P", String(up.child.pid), "-x", "nats-server"], {
        encoding: "utf8",
      }).stdout.trim(),
    );
    expect(server).toBeGreaterThan(0);
    process.kill(server, "SIGSTOP");
    process.kill(server, "SIGKILL");
    await up.stop();
    await waitFor(() => /fetch cut at [1-9]\d* of \d+ bytes/.test(n.loop.log), EVENT_WAIT_MS, "the cut said");
    expect(sha(n.bin)).not.toBe(sha(v6));
    up = m.keep(await meshUp(dir));
    await confirmedAs(n.state, sha(v6), "0.6.0 installed after the restart, confirmed");
    expect(n.loop.log).toMatch(/the fetch of a release resumed where it was cut/);
    expect(readdirSync(releaseDir)).toEqual([]);
  });
});

/**
 * `name`'s first chunk flipped (deleted, and put back altered at the end: same size, other bytes in order), and a
 * copy of its meta as `forged`, its manifest signed by a key that is not the mesh's, and one as `huge`, signed by
 * the mesh, whose file is 1 PiB.
 */
async function tamper(name: string, forged: string, huge: string): Promise<void> {
  const bus = await connectBus(new MeshDir(dir));
  try {
    const m = await bus.jsm.streams.getMessage(RELEASE_STREAM, { last_by_subj: releaseMetaSubject(name) });
    const meta = ObjectMeta.parse(m!.json());
    const first = await bus.jsm.direct.getMessage(RELEASE_STREAM, {
      next_by_subj: releaseChunkSubject(meta.nuid),
      seq: 1,
    });
    await bus.jsm.streams.deleteMessage(RELEASE_STREAM, first!.seq);
    const flipped = Buffer.from(first!.data);
    flipped[0] = flipped[0]! ^ 0xff;
    await bus.js.publish(releaseChunkSubject(meta.nuid), flipped);
    const read = verifyManifest(meta.description, new MeshDir(dir).config().mesh_key);
    if (!read.ok) throw new Error(read.reason);
    const copy = (as: string, manifest: object, key: KeyObject) =>
      bus.js.publish(
        releaseMetaSubject(as),
        JSON.stringify({ ...meta, name: as, description: signManifest(manifest as never, key) }),
      );
    await copy(forged, { ...read.manifest, version: forged.split("/")[0]! }, makeMeshKey().privateKey);
    // signed by the mesh, and larger than any disk here: refused before a byte is fetched
    await copy(
      huge,
      { ...read.manifest, version: huge.split("/")[0]!, size: 2 ** 50 },
      new MeshDir(dir).signingKey(),
    );
  } finally {
    await bus.close();
  }
}
