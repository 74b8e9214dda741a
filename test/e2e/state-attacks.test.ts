// The smaller attacks of issue 18, through the real executable and a real nats-server: a report as a guessing
// oracle for a weak secret, one planted outbox file that blocked every later report, a link at the lock.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadKeys, publicKeys } from "../../src/store/index.ts";
import { type Report, seal } from "../../src/vocabulary/index.ts";
import { enrolAt } from "../mesh/fleet.ts";
import type { MeshDouble } from "../mesh/index.ts";
import { runCli, startRun } from "../support/cli.ts";
import { meshForFile } from "../support/mesh-file.ts";
import { decl } from "../support/offline.ts";
import { tempDir } from "../support/tmp.ts";

let mesh: MeshDouble;
meshForFile((m) => {
  mesh = m;
});

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

/** Any run of 8 hex characters of `digest` in `text`: a part of a digest is still an oracle. */
function partOf(digest: string, text: string): string | null {
  for (let i = 0; i + 8 <= digest.length; i++)
    if (text.includes(digest.slice(i, i + 8))) return digest.slice(i, i + 8);
  return null;
}

async function enrolled(node: string) {
  const base = tempDir();
  const { state, root } = await enrolAt((await mesh.enrolmentCode(node)).code, base);
  return { base, state, root };
}

const run = (state: string, root: string) => startRun(state, root, ["--drift-s", "600"]);

describe("reports carry no digest of a secret", () => {
  it("neither of a file filled from a secret, nor of the original it replaced, even once the secret is gone", async () => {
    const node = "oracle";
    const { state, root } = await enrolled(node);
    const weak = "hunter2\n";
    const original = "the old weak password\n";
    mkdirSync(join(root, "etc"));
    writeFileSync(join(root, "etc/db.pass"), original, { mode: 0o600 });
    const keys = loadKeys(state);
    if (!keys.ok) throw new Error(keys.reason);
    const sealed = seal(Buffer.from(weak), publicKeys(keys.keys).sealing);
    const plain = { id: "motd", type: "file", path: "/etc/motd", content: "hello\n" };
    const host = run(state, root);
    const reports: Report[] = [];
    try {
      await mesh.declare(node, {
        v: 1,
        node,
        mode: "converged",
        secrets: { db: sealed },
        resources: [{ id: "db", type: "file", path: "/etc/db.pass", secret: "db", mode: "0600" }, plain],
      });
      reports.push((await mesh.awaitReport(1, { node })).value!);
      expect(reports[0]!.outcome).toBe("applied");
      expect(readFileSync(join(root, "etc/db.pass"), "utf8")).toBe(weak);
      // the same path, now declared in clear: the original a secret once replaced is still not said
      await mesh.declare(node, {
        v: 1,
        node,
        mode: "converged",
        resources: [{ id: "db", type: "file", path: "/etc/db.pass", content: "not secret\n" }, plain],
      });
      reports.push((await mesh.awaitReport(2, { node })).value!);
      expect(reports[1]!.outcome).toBe("applied");
    } finally {
      expect(await host.stop()).toBe(0);
    }
    const status = await runCli(["status", "--json", "--state", state, "--root", root]);
    const said = [JSON.stringify(reports), status.stdout, host.output().stdout, host.output().stderr].join(
      "\n",
    );
    for (const [what, digest] of [
      ["the secret", sha256(weak)],
      ["the held original", sha256(original)],
    ] as const)
      expect(partOf(digest, said), `a part of ${what}'s digest`).toBeNull();
    // still held, and said so, only without its digest
    expect(reports[0]!.holds).toEqual([{ id: "db", path: "/etc/db.pass" }]);
    // a file of no secret keeps its read-back digest (the control)
    const motd = reports[0]!.steps.find((s) => s.id === "motd")!;
    expect(motd.detail).toContain(`sha256:${sha256("hello\n").slice(0, 12)}`);
    expect(reports[0]!.steps.find((s) => s.id === "db")!.detail).not.toContain("sha256");
  });
});

describe("the outbox", () => {
  it("sets a malformed, a foreign and a linked entry aside, says so in the next report, and is never blocked", async () => {
    const node = "outboxed";
    const { state, root, base } = await enrolled(node);
    const outbox = join(state, "outbox");
    mkdirSync(outbox, { recursive: true });
    // named to sort before anything the host writes: each would be sent first
    writeFileSync(join(outbox, "000000000000001-1-000001.json"), "{ not json");
    const foreign: Report = {
      v: 1,
      node: "someone-else",
      declaration: { seq: 1, digest: sha256("x") },
      outcome: "applied",
      started_at: "2026-01-05T10:00:00.000Z",
      finished_at: "2026-01-05T10:00:00.000Z",
      steps: [],
      holds: [],
      refusals: [],
      host: { version: "0.1.0", os: "linux" },
    };
    writeFileSync(
      join(outbox, "000000000000002-1-000001.json"),
      JSON.stringify({ format: 1, report: foreign }),
    );
    const elsewhere = join(base, "elsewhere.json");
    writeFileSync(elsewhere, JSON.stringify({ format: 1, report: { ...foreign, node } }));
    symlinkSync(elsewhere, join(outbox, "000000000000003-1-000001.json"));
    const host = run(state, root);
    try {
      await mesh.declare(node, {
        v: 1,
        node,
        mode: "converged",
        resources: [{ id: "f", type: "file", path: "/f", content: "x\n" }],
      });
      const first = (await mesh.awaitReport(1, { node })).value!;
      expect(first.outcome).toBe("applied");
      expect(first.notes).toEqual([
        "outbox entry 000000000000001-1-000001.json set aside in outbox/rejected/: not JSON",
        'outbox entry 000000000000002-1-000001.json set aside in outbox/rejected/: a report of node "someone-else", not this node\'s',
        "outbox entry 000000000000003-1-000001.json set aside in outbox/rejected/: not a regular file",
      ]);
      // the next one says nothing more, and nothing planted was ever sent
      await mesh.declare(node, {
        v: 1,
        node,
        mode: "converged",
        resources: [{ id: "f", type: "file", path: "/f", content: "y\n" }],
      });
      const second = (await mesh.awaitReport(2, { node })).value!;
      expect(second.notes ?? []).toEqual([]);
      expect(mesh.reports.filter((r) => r.subject === `mesh.report.${node}`)).toHaveLength(2);
    } finally {
      expect(await host.stop()).toBe(0);
    }
    expect(readdirSync(join(outbox, "rejected")).sort()).toEqual([
      "000000000000001-1-000001.json",
      "000000000000002-1-000001.json",
      "000000000000003-1-000001.json",
    ]);
    expect(readdirSync(outbox)).toEqual(["rejected"]);
    // the link was moved, not followed: what it pointed at is untouched
    expect(existsSync(elsewhere)).toBe(true);
  });
});

describe("the lock", () => {
  it.each([
    ["dangling", "/nonexistent/lock"],
    ["pointing at a file", "/etc/hostname"],
  ])(
    "a link at the lock path (%s) is refused at once, one line, exit 2, nothing changed",
    async (_kind, target) => {
      const base = tempDir();
      const state = join(base, "state");
      const root = join(base, "root");
      mkdirSync(root);
      mkdirSync(state, { mode: 0o700 });
      symlinkSync(target, join(state, "lock"));
      const file = join(base, "d.json");
      writeFileSync(file, JSON.stringify(decl([{ id: "f", type: "file", path: "/f", content: "x" }])));
      const started = Date.now();
      const r = await runCli(["apply", file, "--state", state, "--root", root], { timeoutMs: 120_000 });
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toBe(
        `mesh-host: ${join(state, "lock")} is a symbolic link, not a lock this host made: refused (remove it if nobody should have put it there)\n`,
      );
      // the old host waited out the ten-minute lock timeout
      expect(Date.now() - started).toBeLessThan(60_000);
      expect(existsSync(join(root, "f"))).toBe(false);
      expect(readFileSync("/etc/hostname", "utf8")).toBeTruthy();
    },
  );
});
