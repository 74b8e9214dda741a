// Issue 18, "a link redirects root's writes", through the built executable: a checked directory swapped for a
// link while an earlier action of the same declaration runs, and a user's planted link under `--root /`
// inside a throwaway mount namespace. Nothing lands outside the declared path; the step fails naming it.
import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../support/cli.ts";
import { ensureSea } from "../support/sea.ts";
import { tempDir } from "../support/tmp.ts";

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);

const decl = (resources: unknown[]) => ({ v: 1, node: "n1", mode: "converged", resources });

function place() {
  const base = tempDir("mesh-paths-");
  const root = join(base, "root");
  const outside = join(base, "outside");
  mkdirSync(root);
  mkdirSync(outside, { mode: 0o700 });
  writeFileSync(join(outside, "precious"), "keep me\n");
  return { base, root, outside, state: join(base, "state"), file: join(base, "d.json") };
}

/** An action that swaps declared directory `dir` (under `root`) for a link to `to`, the way an attacker would. */
const swap = (root: string, dir: string, to: string) => ({
  id: "swap",
  type: "action",
  run: ["sh", "-c", 'mv "$0" "$0.moved" && ln -s "$1" "$0"', join(root, dir), to],
});

async function apply(p: ReturnType<typeof place>, resources: unknown[]) {
  writeFileSync(p.file, JSON.stringify(decl(resources)));
  const r = await runCli(["apply", p.file, "--root", p.root, "--state", p.state, "--json"]);
  return { ...r, doc: r.stdout ? JSON.parse(r.stdout) : null };
}

const stepOf = (doc: { report: { steps: { id: string; did: string; detail: string }[] } }, id: string) =>
  doc.report.steps.find((s) => s.id === id);

describe("a directory swapped for a link during the apply", () => {
  it("file: the write is refused naming the path, nothing lands where the link points", async () => {
    const p = place();
    mkdirSync(join(p.root, "srv/app"), { recursive: true });
    const r = await apply(p, [
      swap(p.root, "/srv/app", p.outside),
      { id: "conf", type: "file", path: "/srv/app/conf", content: "mesh\n" },
    ]);
    expect(r.code, r.stderr).toBe(1);
    expect(stepOf(r.doc, "swap")?.did).toBe("ran");
    expect(stepOf(r.doc, "conf")).toMatchObject({
      did: "failed",
      detail:
        "a parent of /srv/app/conf (/srv/app) is a symbolic link that leaves the root; it is not followed",
    });
    expect(readdirSync(p.outside)).toEqual(["precious"]);
    expect(readdirSync(join(p.root, "srv/app.moved"))).toEqual([]);
  });

  it("directory: the chmod of 0777 never reaches the link's target (it stays 0700)", async () => {
    const p = place();
    mkdirSync(join(p.root, "srv/data"), { recursive: true, mode: 0o755 });
    const r = await apply(p, [
      swap(p.root, "/srv/data", p.outside),
      { id: "data", type: "directory", path: "/srv/data", mode: "0777" },
    ]);
    expect(r.code, r.stderr).toBe(1);
    expect(stepOf(r.doc, "data")).toMatchObject({
      did: "failed",
      detail: "/srv/data is a symbolic link that leaves the root; it is not followed",
    });
    expect(statSync(p.outside).mode & 0o777).toBe(0o700);
    expect(readdirSync(p.outside)).toEqual(["precious"]);
  });

  it("file and directory below a swapped parent: a purge never lists, a chmod never reaches, the link's target", async () => {
    const p = place();
    mkdirSync(join(p.root, "etc/app/conf.d"), { recursive: true });
    mkdirSync(join(p.outside, "conf.d"), { mode: 0o700 });
    writeFileSync(join(p.outside, "conf.d/theirs"), "theirs\n");
    const r = await apply(p, [
      swap(p.root, "/etc/app", p.outside),
      { id: "dir", type: "directory", path: "/etc/app/conf.d", mode: "0777", purge: true },
    ]);
    expect(r.code, r.stderr).toBe(1);
    expect(stepOf(r.doc, "dir")?.detail).toContain(
      "a parent of /etc/app/conf.d (/etc/app) is a symbolic link",
    );
    expect(statSync(join(p.outside, "conf.d")).mode & 0o777).toBe(0o700);
    expect(readFileSync(join(p.outside, "conf.d/theirs"), "utf8")).toBe("theirs\n");
  });
});

/**
 * Run `script` as root in a throwaway mount namespace with a tmpfs over `over`: whatever the host does there
 * vanishes with the namespace, and nothing outside it is reachable through a path under `over`.
 */
function inNamespace(over: string, script: string, env: Record<string, string>) {
  const r = spawnSync(
    "unshare",
    ["-m", "--propagation", "private", "sh", "-euc", `mount -t tmpfs tmpfs "$OVER"\n${script}`],
    { encoding: "utf8", env: { ...process.env, ...env, OVER: over }, timeout: 120_000 },
  );
  if (r.status !== 0) throw new Error(`unshare exited ${r.status ?? r.signal}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

describe("--root /: a user's own directory with a planted link", () => {
  it("root's write and chmod land nowhere outside; each step fails naming its path, the rest is applied", () => {
    if (process.getuid?.() !== 0) throw new Error("this test needs root (a mount namespace and --root /)");
    const over = tempDir("mesh-ns-");
    const u = `${over}/home/u`;
    const keys = {
      id: "keys",
      type: "file",
      path: `${u}/.ssh/authorized_keys`,
      content: "ssh-ed25519 AAAA\n",
    };
    const cfg = { id: "cfg", type: "directory", path: `${u}/cfg`, mode: "0777" };
    const www = { id: "www", type: "file", path: `${u}/www/index.html`, content: "hi\n" };
    // beside the planted link, the rest of the declaration: still the mesh's to manage
    const motd = { id: "motd", type: "file", path: `${over}/etc/motd`, content: "managed\n" };
    // in the namespace: /home/u owned by a user, who plants links at .ssh and at cfg to root's 0700 directories,
    // and whose real www is swapped for a link by an earlier action of the same declaration
    const out = inNamespace(
      over,
      `mkdir -p "$OVER/home/u/www" "$OVER/rootonly" "$OVER/rootonly2" "$OVER/state" "$OVER/etc"
chmod 0700 "$OVER/rootonly" "$OVER/rootonly2"
echo secret > "$OVER/rootonly/shadow"
chown 1000:1000 "$OVER/home/u" "$OVER/home/u/www"
ln -s "$OVER/rootonly" "$OVER/home/u/.ssh"
ln -s "$OVER/rootonly2" "$OVER/home/u/cfg"
chown -h 1000:1000 "$OVER/home/u/.ssh" "$OVER/home/u/cfg"
attempt() {
  printf '%s' "$2" > "$OVER/$1.json"
  set +e
  "$BIN" apply "$OVER/$1.json" --root / --state "$OVER/state" --json > "$OVER/$1.out" 2> "$OVER/$1.err"
  echo "$1.exit=$?"
  set -e
  echo "$1.err=$(grep -v '^{' "$OVER/$1.err" | tr '\\n' ' ')"
  echo "$1.out=$(base64 -w0 < "$OVER/$1.out")"
}
attempt keys "$KEYS"
echo "motd=$(cat "$OVER/etc/motd")"
attempt cfg "$CFG"
attempt www "$WWW"
echo "rootonly=$(ls -A "$OVER/rootonly" | tr '\\n' ' ')"
echo "modes=$(stat -c %a "$OVER/rootonly") $(stat -c %a "$OVER/rootonly2")"`,
      {
        BIN: process.env.MESH_HOST_BIN!,
        KEYS: JSON.stringify(decl([keys, motd])),
        CFG: JSON.stringify(decl([cfg])),
        WWW: JSON.stringify(decl([swap("/", `${u}/www`, `${over}/rootonly`), www])),
      },
    );
    const line = (k: string) => out.match(new RegExp(`^${k.replace(".", "\\.")}=(.*)$`, "m"))?.[1] ?? "";
    expect(line("rootonly").trim()).toBe("shadow");
    expect(line("modes")).toBe("700 700");
    // planted before the apply: that resource fails naming its path, exit 1, and the rest is applied
    const stepsIn = (k: string) =>
      JSON.parse(Buffer.from(line(`${k}.out`), "base64").toString()).report.steps as {
        id: string;
        did: string;
        detail: string;
      }[];
    expect(line("keys.exit")).toBe("1");
    expect(stepsIn("keys")).toEqual([
      {
        id: "keys",
        type: "file",
        did: "failed",
        detail: `a parent of ${u}/.ssh/authorized_keys (${u}/.ssh) is a symbolic link; it is not followed`,
      },
      expect.objectContaining({ id: "motd", did: "created" }),
    ]);
    expect(line("motd")).toBe("managed");
    expect(line("cfg.exit")).toBe("1");
    expect(stepsIn("cfg")).toContainEqual({
      id: "cfg",
      type: "directory",
      did: "failed",
      detail: `${u}/cfg is a symbolic link; it is not followed`,
    });
    // swapped during it: the step fails naming the path, exit 1
    expect(line("www.exit")).toBe("1");
    expect(stepsIn("www").find((s) => s.id === "www")).toMatchObject({
      did: "failed",
      detail: `a parent of ${u}/www/index.html (${u}/www) is a symbolic link; it is not followed`,
    });
  });
});

describe("without /proc", () => {
  it("every path is refused in one line saying why, and nothing is written by name instead", () => {
    if (process.getuid?.() !== 0) throw new Error("this test needs root (a mount namespace)");
    const p = place();
    writeFileSync(p.file, JSON.stringify(decl([{ id: "f", type: "file", path: "/etc/x", content: "x\n" }])));
    const r = spawnSync(
      "unshare",
      [
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        'umount -l /proc && exec "$@"',
        "sh",
        process.env.MESH_HOST_BIN!,
      ].concat(["apply", p.file, "--root", p.root, "--state", p.state]),
      { encoding: "utf8", timeout: 120_000 },
    );
    expect(r.status, r.stderr).toBe(2);
    expect(
      r.stderr
        .trim()
        .split("\n")
        .filter((l) => !l.startsWith("{")),
    ).toEqual([
      'mesh-host: resource "f", field "path": /proc/self/fd is missing: without /proc the host cannot act on a path without following links, so it acts on none',
    ]);
    expect(readdirSync(p.root)).toEqual([]);
  });
});
