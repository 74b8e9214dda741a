// The README's commands are run as it writes them: the offline quick start prints what its output blocks say
// from an empty root, and the first mesh's six commands make a mesh, enrol a node and push to it for real (a
// real nats-server). Only /tmp paths and the port are moved aside, so runs in parallel cannot meet.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { tryNext } from "../../scripts/demo.ts";
import { freePortPairs } from "../mesh/operator.ts";
import { ensureSea, REPO } from "../support/sea.ts";
import { tempDir } from "../support/tmp.ts";

const README = readFileSync(join(REPO, "README.md"), "utf8");

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);

/** The section of the README under `heading`, to the next heading of its level. */
function section(heading: string): string {
  const start = README.indexOf(`\n${heading}\n`);
  expect(start, heading).toBeGreaterThan(0);
  const next = README.indexOf("\n## ", start + heading.length + 2);
  return README.slice(start, next < 0 ? undefined : next);
}

/** The fenced blocks of `text`, with their info string. */
function blocks(text: string): { info: string; body: string }[] {
  return [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ info: m[1]!, body: m[2]! }));
}

const running: ChildProcess[] = [];
/** How long a stopped group is given to exit before it is killed. */
const STOP_WAIT_MS = 30_000;

/** `p`'s process group stopped (SIGTERM, then SIGKILL past STOP_WAIT_MS), resolved once `p` has exited. */
function stopped(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((resolve) => p.once("exit", () => resolve()));
  const signal = (s: NodeJS.Signals) => {
    try {
      process.kill(-p.pid!, s);
    } catch {}
  };
  signal("SIGTERM");
  const timer = setTimeout(() => signal("SIGKILL"), STOP_WAIT_MS);
  return exited.finally(() => clearTimeout(timer));
}

// after each test, before tmp.ts removes its directories (after-hooks run last-registered first): a server
// still writing into one made the removal fail (ENOTEMPTY)
afterEach(async () => {
  await Promise.all(running.splice(0).map(stopped));
});

describe("README.md", () => {
  it("the demo ends with what to try next: the README's own commands, line for line", () => {
    const said = tryNext();
    for (const heading of ["## A first apply offline", "## A first mesh in six commands"])
      for (const line of blocks(section(heading))[0]!.body.trim().split("\n"))
        expect(said, line).toContain(`  ${line}\n`.trimEnd());
    expect(said).toMatch(/^\nwhat to try next \(from README\.md\):/);
  });

  it("its first apply prints what it says, run as written from an empty root", () => {
    const text = section("## A first apply offline");
    const [script, ...samples] = blocks(text);
    expect(script!.info).toBe("sh");
    const base = tempDir();
    const place = (line: string) =>
      line
        .replace(/#.*$/, "")
        .replace(/\/tmp\/demo-root/g, join(base, "root"))
        .replace(/\/tmp\/demo-state/g, join(base, "state"))
        .replace("npm run --silent mesh-host --", process.env.MESH_HOST_BIN!)
        .trim();
    const printed: string[] = [];
    for (const line of script!.body.trim().split("\n").map(place)) {
      const r = spawnSync("sh", ["-c", line], { cwd: REPO, encoding: "utf8" });
      expect(r.status, line).toBe(0);
      if (line.startsWith(process.env.MESH_HOST_BIN!)) printed.push(r.stdout);
    }
    // the first run, the second (nothing to do), the plan after the edit
    expect(samples.map((b) => b.body)).toEqual([printed[0], printed[1], printed[2]]);
  });

  it("its first mesh in six commands runs as written: the push is applied and reported", async () => {
    const [script] = blocks(section("## A first mesh in six commands"));
    expect(script!.info).toBe("sh");
    const base = tempDir();
    const [port] = await freePortPairs(1);
    const lines = script!.body
      .trim()
      .split("\n")
      .map((l) =>
        l
          .replace(/ {2,}#.*$/, "")
          .replace(/\/tmp\/demo/g, join(base, "demo"))
          .replace("127.0.0.1:4222", `127.0.0.1:${port}`)
          .trim(),
      );
    const [exports, ...commands] = lines;
    expect(exports).toMatch(/; export /);
    expect(commands.filter((l) => l.startsWith("mesh-host "))).toHaveLength(6);
    let pushed = "";
    for (const line of commands) {
      if (line.endsWith("&")) {
        const p = spawn("sh", ["-c", `${exports}\nexec ${line.slice(0, -1)}`], { cwd: REPO, detached: true });
        running.push(p);
        if (line.includes("mesh up")) await said(p, /mesh up: /);
        continue;
      }
      const r = spawnSync("sh", ["-c", `${exports}\n${line}`], {
        cwd: REPO,
        encoding: "utf8",
        timeout: 120_000,
      });
      expect(r.status, `${line}\n${r.stdout}${r.stderr}`).toBe(0);
      pushed = r.stdout;
    }
    expect(pushed).toMatch(/^demo: serial 1\n/);
    expect(pushed).toContain("created  file       index     /srv/site/index.html created");
    expect(readFileSync(join(base, "demo-root/srv/site/index.html"), "utf8")).toBe(
      "<h1>hello from the mesh</h1>\n",
    );
  }, 300_000);
});

/** Resolves once `p` has printed a line matching `pattern` on stdout; fails with what it said if it exits first. */
function said(p: ChildProcess, pattern: RegExp): Promise<void> {
  let out = "";
  return new Promise((resolve, reject) => {
    p.stdout!.on("data", (d) => {
      out += d;
      if (pattern.test(out)) resolve();
    });
    p.stderr!.on("data", (d) => {
      out += d;
    });
    p.on("exit", (code) => reject(new Error(`exited ${code} before ${pattern}:\n${out}`)));
  });
}
