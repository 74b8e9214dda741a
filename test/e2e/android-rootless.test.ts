// The Android host without root, on Linux: the Android build (android/build.mjs, the pinned Linux runtime
// standing in for Android's) run as an unprivileged user (uid 65534, no groups, umask 077 as init gives its
// services) in directories it owns. Offline apply, undeclare, holds and drift repair; owner and group ignored
// and said; a path it may not write failing cleanly; every type beyond the floor refused; the rollback
// launcher under mksh (Android's shell); and `run` held in a mesh (the mesh double on loopback).
import { type ChildProcess, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EVENT_WAIT_MS, MeshDouble, waitFor } from "../mesh/index.ts";
import { killGroup, spawnGroup } from "../support/processes.ts";
import { PACKAGE, PINNED_RUNTIME, REPO } from "../support/sea.ts";
import { runMarkerEnv } from "../support/strays.ts";
import { tempDir } from "../support/tmp.ts";

const ANDROID_SEA = join(REPO, "dist/android", `mesh-host-${PACKAGE.version}-android-x64`);
const LAUNCH = join(REPO, "pkgbuild/launch");
/** nobody: no rights outside the directories a test gives it. */
const UID = 65534;
const AS_ROOT = process.getuid?.() === 0;
const MKSH = spawnSync("sh", ["-c", "command -v mksh"], { encoding: "utf8" }).stdout.trim();
const NON_FLOOR = ["service", "package", "process", "image", "network", "volume", "container", "overlay"];

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * argv run as the unprivileged user with init's umask. As root: setpriv to uid/gid 65534 with no groups. Not
 * root already: run as this user, who is just as unprivileged outside its temp directories.
 */
function unprivileged(argv: string[]): [string, string[]] {
  const sh = ["sh", "-c", 'umask 077; exec "$@"', "sh", ...argv];
  return AS_ROOT
    ? ["setpriv", [`--reuid=${UID}`, `--regid=${UID}`, "--clear-groups", "--", ...sh]]
    : [sh[0]!, sh.slice(1)];
}

// a bare environment, as on the device, but for the test run's name: a host left running is still the run's
function spawnUnprivileged(argv: string[], env: Record<string, string>): ChildProcess {
  const [cmd, args] = unprivileged(argv);
  const child = spawnGroup(cmd, args, {
    env: { PATH: "/usr/bin:/bin", ...runMarkerEnv(), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.once("exit", () => killGroup(child.pid!));
  return child;
}

function runAs(argv: string[], env: Record<string, string> = {}): Promise<Result> {
  const child = spawnUnprivileged(argv, env);
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (d) => (stdout += d));
  child.stderr!.on("data", (d) => (stderr += d));
  const timer = setTimeout(() => killGroup(child.pid!), EVENT_WAIT_MS);
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const host = (args: string[], env: Record<string, string> = {}) => runAs([ANDROID_SEA, ...args], env);

/** A temp directory the unprivileged user owns, with `dirs` made inside it. */
function owned(...dirs: string[]): string {
  const base = tempDir("mesh-android-");
  for (const d of dirs) mkdirSync(join(base, d), { recursive: true });
  if (AS_ROOT) spawnSync("chown", ["-R", `${UID}:${UID}`, base]);
  return base;
}

/** A directory inside `base` the unprivileged user may not write. */
function locked(base: string, name: string): string {
  const dir = join(base, name);
  mkdirSync(dir);
  if (AS_ROOT) chownSync(dir, 0, 0);
  chmodSync(dir, 0o555);
  return dir;
}

/** One line of stdout or stderr that looks like a stack trace ("    at f (file:1:2)"). */
const STACK = /^\s+at .+:\d+:\d+\)?$/m;

const decl = (node: string, resources: object[], extra: object = {}) => ({
  v: 1,
  node,
  mode: "converged",
  resources,
  ...extra,
});

beforeAll(
  () => {
    // The Android executable, built (or found up to date) with the pinned Linux runtime as the stand-in.
    const env = { ...process.env };
    for (const k of ["NODE_OPTIONS", "MESH_ANDROID_RUNTIME", "MESH_ANDROID_BLOB_RUNTIME"]) delete env[k];
    const r = spawnSync(process.execPath, [join(REPO, "android/build.mjs"), "--runtime", PINNED_RUNTIME], {
      cwd: REPO,
      env,
      encoding: "utf8",
      timeout: 5 * 60 * 1000,
    });
    if (r.status !== 0)
      throw new Error(`android/build.mjs exited ${r.status ?? r.signal}:\n${r.stdout}${r.stderr}`);
  },
  5 * 60 * 1000,
);

describe("the Android host as an unprivileged user, offline", () => {
  function place() {
    const base = owned("root/etc", "state");
    writeFileSync(join(base, "root/etc/motd"), "the device's own motd\n");
    if (AS_ROOT) chownSync(join(base, "root/etc/motd"), UID, UID);
    const file = join(base, "decl.json");
    return { base, root: join(base, "root"), state: join(base, "state"), file };
  }
  const write = (file: string, body: object) => writeFileSync(file, JSON.stringify(body));

  it("applies file, directory and action, ignores owner and group and says so, repairs drift, undeclares and gives the held file back", async () => {
    const { root, state, file, base } = place();
    const flags = ["--host", "android", "--root", root, "--state", state, "--json"];
    const out = join(base, "ran");
    const first = decl("droid", [
      { id: "motd", type: "file", path: "/etc/motd", content: "held by the mesh\n", mode: "0644" },
      { id: "app", type: "directory", path: "/srv/app", mode: "0750" },
      {
        id: "conf",
        type: "file",
        path: "/srv/app/app.conf",
        content: "x=1\n",
        mode: "0640",
        owner: "root",
        group: "root",
      },
      { id: "stamp", type: "action", run: ["sh", "-c", 'id -u > "$OUT"'], env: { OUT: out }, on: ["conf"] },
    ]);
    write(file, first);
    const a = await host(["apply", file, ...flags]);
    expect(a.code, a.stderr).toBe(0);
    const doc = JSON.parse(a.stdout);
    expect(doc.report.host).toMatchObject({ os: "android" });
    expect(doc.report.steps.map((s: { id: string; did: string }) => `${s.id}:${s.did}`)).toEqual([
      "motd:updated",
      "app:created",
      "conf:created",
      "stamp:ran",
    ]);
    const conf = doc.report.steps.find((s: { id: string }) => s.id === "conf");
    expect(conf.detail).toContain("owner/group ignored: running without root");
    expect(doc.plan.find((s: { id: string }) => s.id === "conf").detail).toContain("owner/group ignored");
    expect(doc.report.holds).toEqual([expect.objectContaining({ id: "motd", path: "/etc/motd" })]);
    // what it made is its own, with the declared modes despite init's umask 077
    const made = statSync(join(root, "srv/app/app.conf"));
    if (AS_ROOT) expect([made.uid, made.gid]).toEqual([UID, UID]);
    expect(made.mode & 0o777).toBe(0o640);
    expect(statSync(join(root, "srv/app")).mode & 0o777).toBe(0o750);
    expect(statSync(join(root, "etc/motd")).mode & 0o777).toBe(0o644);
    expect(readFileSync(out, "utf8").trim()).toBe(AS_ROOT ? String(UID) : String(process.getuid?.()));

    // unchanged the second time; a hand edit is repaired on the next apply
    const again = JSON.parse((await host(["apply", file, ...flags])).stdout);
    expect(again.report.steps.map((s: { did: string }) => s.did)).toEqual([
      "unchanged",
      "unchanged",
      "unchanged",
      "skipped",
    ]);
    writeFileSync(join(root, "srv/app/app.conf"), "edited by hand\n");
    const repaired = JSON.parse((await host(["apply", file, ...flags])).stdout);
    expect(repaired.report.steps.find((s: { id: string }) => s.id === "conf")).toMatchObject({
      did: "repaired",
    });
    expect(readFileSync(join(root, "srv/app/app.conf"), "utf8")).toBe("x=1\n");

    // the device's own file is held; undeclaring everything gives it back and removes what the mesh made
    const status = JSON.parse((await host(["status", ...flags])).stdout);
    expect(status).toMatchObject({ host: "android", state });
    expect(status.holds).toEqual(expect.arrayContaining([expect.objectContaining({ path: "/etc/motd" })]));
    write(file, decl("droid", [], { owns_nothing: true }));
    const gone = await host(["apply", file, ...flags]);
    expect(gone.code, gone.stderr).toBe(0);
    expect(
      JSON.parse(gone.stdout)
        .report.steps.map((s: { id: string; did: string }) => `${s.id}:${s.did}`)
        .sort(),
    ).toEqual(["app:removed", "conf:removed", "motd:restored", "stamp:removed"]);
    expect(readFileSync(join(root, "etc/motd"), "utf8")).toBe("the device's own motd\n");
    expect(existsSync(join(root, "srv/app"))).toBe(false);
    expect(JSON.parse((await host(["status", ...flags])).stdout).holds).toEqual([]);
  });

  it("a path it may not write is a clean failure naming it: exit 1, no stack trace, nothing half-written", async () => {
    const { base, root, state, file } = place();
    locked(root, "system");
    write(file, decl("droid", [{ id: "sys", type: "file", path: "/system/mesh.conf", content: "no\n" }]));
    const r = await host(["apply", file, "--host", "android", "--root", root, "--state", state]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(
      /^\s+failed\s+file\s+sys\s+could not write \/system\/mesh\.conf: permission denied \(EACCES\)$/m,
    );
    expect(`${r.stdout}${r.stderr}`).not.toMatch(STACK);
    expect(existsSync(join(root, "system/mesh.conf"))).toBe(false);

    // a state directory it may not make: the default /data/mesh-host, or any other; one line, the path named
    const elsewhere = join(locked(base, "nostate"), "state");
    for (const [args, path] of [
      [[], "/data/mesh-host"],
      [["--state", elsewhere], elsewhere],
    ] as const) {
      const s = await host(["apply", file, "--host", "android", "--root", root, ...args]);
      // exit 2 and our words since issue 21: the state out of reach is the caller's to mend, not an apply that failed
      expect(s.code, path).toBe(2);
      expect(s.stdout).toBe("");
      expect(s.stderr).toBe(
        `mesh-host: cannot make the directory ${path}: permission denied (run as root or give --state DIR)\n`,
      );
    }
  });

  it.each(NON_FLOOR)(
    "refuses a %s resource: not on an Android host, exit 2, one line, nothing changed",
    async (type) => {
      const { root, state, file } = place();
      write(file, decl("droid", [{ id: "x", type }]));
      const r = await host(["apply", file, "--host", "android", "--root", root, "--state", state]);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr).toBe(
        `mesh-host: resource "x", field "type": type "${type}": not on an Android host\n`,
      );
      expect(readdirSync(state)).toEqual([]);
    },
  );

  it("refuses the Arch host's commands, which are not in the Android build: exit 2, one line", async () => {
    const { state } = place();
    for (const args of [["overlay", "take", "--tunnel", "wg0"], ["install-service"]]) {
      const r = await host([...args, "--host", "android", "--state", state]);
      expect(r.code, args[0]).toBe(2);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stderr).toMatch(/^mesh-host: not on an Android host: [\w-]+ is not in this executable\n$/);
    }
    // the operator's half is not in it either: a phone is a node, never a mesh's controller
    const mesh = await host(["mesh", "nodes"]);
    expect(mesh.code).toBe(2);
    expect(mesh.stderr).toBe(
      "mesh-host: the operator's commands (mesh …) are not in this executable, which runs a node only\n",
    );
  });
});

describe.skipIf(!MKSH)("the rollback launcher under mksh, as the unprivileged user", () => {
  const sha256 = (f: string) => createHash("sha256").update(readFileSync(f)).digest("hex");

  /** The device: a read-only binary it cannot replace (/system/bin), a state directory it owns (/data). */
  function device() {
    const base = owned("data/mesh-host", "standins", "log");
    const system = join(base, "system");
    mkdirSync(system);
    if (AS_ROOT) chownSync(system, 0, 0);
    const bin = join(system, "mesh-host");
    const state = join(base, "data/mesh-host");
    const log = join(base, "log/ran");
    const standIn = (name: string, confirms: boolean) => {
      const f = join(base, "standins", name);
      writeFileSync(
        f,
        [
          "#!/bin/sh",
          `echo ${name} >> '${log}'`,
          confirms
            ? `d=$(sha256sum < "$0"); printf '%s\\n' "\${d%% *}" > '${state}/confirmed'; exit 0`
            : "exit 1",
          "",
        ].join("\n"),
      );
      chmodSync(f, 0o755);
      return f;
    };
    // an OTA or `adb push` replaces the file, as root
    const install = (f: string) => {
      rmSync(bin, { force: true });
      copyFileSync(f, bin);
      chmodSync(bin, 0o755);
    };
    const start = (args: string[] = ["run", "--state", state]) =>
      runAs([MKSH, LAUNCH, ...args], { MESH_HOST_BIN: bin });
    const ran = () => (existsSync(log) ? readFileSync(log, "utf8").trim().split("\n") : []);
    return { base, bin, state, standIn, install, start, ran };
  }

  /** What `enrol` leaves in the state directory, owned by the service's user: `launch run` waits for it. */
  function enrolled(state: string) {
    for (const f of ["membership.json", "node.json"]) {
      writeFileSync(join(state, f), "{}\n");
      if (AS_ROOT) chownSync(join(state, f), UID, UID);
    }
  }

  it("upgrades through the binary under /data/mesh-host/bin, which the service's user replaces; /system holds only the launcher", async () => {
    const d = device();
    enrolled(d.state);
    // the device's layout with the launcher (android/rc.mjs): root's /system with the launcher alone, the
    // executable under the state directory, in bin/ (init makes it on post-fs-data, owned by the user)
    const system = join(d.base, "system");
    copyFileSync(LAUNCH, join(system, "mesh-host-launch"));
    const binDir = join(d.state, "bin");
    mkdirSync(binDir);
    if (AS_ROOT) chownSync(binDir, UID, UID);
    const bin = join(binDir, "mesh-host");
    // an upgrade as the README says: a copy beside it, then a rename over it, as the service's user
    const upgrade = async (f: string) => {
      const r = await runAs([
        "sh",
        "-c",
        `cp '${f}' '${bin}.new' && chmod 0700 '${bin}.new' && mv '${bin}.new' '${bin}'`,
      ]);
      expect(r.code, r.stderr).toBe(0);
    };
    const start = () =>
      runAs([MKSH, join(system, "mesh-host-launch"), "run", "--state", d.state], { MESH_HOST_BIN: bin });
    const [v1, v2, v3] = [d.standIn("v1", true), d.standIn("v2", false), d.standIn("v3", true)];
    await upgrade(v1);
    expect((await start()).code).toBe(0);
    await upgrade(v2);
    for (let i = 0; i < 3; i++) expect((await start()).code).toBe(1);
    // past the limit the launcher runs its kept copy of v1, once; the next release is taken as it comes
    expect((await start()).code).toBe(0);
    await upgrade(v3);
    expect((await start()).code).toBe(0);
    expect(d.ran()).toEqual(["v1", "v2", "v2", "v2", "v1", "v3"]);
    expect(readFileSync(join(d.state, "confirmed"), "utf8").trim()).toBe(sha256(v3));
    expect(readFileSync(join(d.state, "rollback-note"), "utf8")).toContain(`rolled back from ${sha256(v2)}`);
    expect(readdirSync(system)).toEqual(["mesh-host-launch"]);
    if (AS_ROOT) expect(statSync(bin).uid).toBe(UID);
  });

  it("counts the failed starts of a new release and rolls back once to the last confirmed copy it keeps", async () => {
    const d = device();
    enrolled(d.state);
    const v1 = d.standIn("v1", true);
    const v2 = d.standIn("v2", false);
    d.install(v1);
    expect((await d.start()).code).toBe(0);
    expect(readFileSync(join(d.state, "confirmed"), "utf8").trim()).toBe(sha256(v1));
    d.install(v2);
    for (let i = 0; i < 3; i++) expect((await d.start()).code).toBe(1);
    const back = await d.start();
    expect(back.code).toBe(0);
    expect(d.ran()).toEqual(["v1", "v2", "v2", "v2", "v1"]);
    expect(readFileSync(join(d.state, "rollback-note"), "utf8").trim()).toBe(
      `rolled back from ${sha256(v2)} to ${sha256(v1)} after 3 failed starts`,
    );
    // the rolled-back binary confirmed itself again: the launcher stays on it while v2 is installed
    const stay = await d.start();
    expect(stay.stderr).toMatch(/staying on the confirmed/);
    expect(d.ran().at(-1)).toBe("v1");
    if (AS_ROOT) expect(statSync(join(d.state, "launcher/confirmed-bin")).uid).toBe(UID);
  });

  it("starts the Android executable itself, which applies as that user", async () => {
    const d = device();
    d.install(ANDROID_SEA);
    const root = join(d.base, "data/root");
    mkdirSync(root);
    if (AS_ROOT) chownSync(root, UID, UID);
    const file = join(d.base, "decl.json");
    writeFileSync(
      file,
      JSON.stringify(
        decl("droid", [{ id: "f", type: "file", path: "/hello", content: "hi\n", mode: "0644" }]),
      ),
    );
    const r = await d.start(["apply", file, "--host", "android", "--root", root, "--state", d.state]);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(join(root, "hello"), "utf8")).toBe("hi\n");
    const launcher = readFileSync(join(d.state, "launcher/state"), "utf8");
    expect(launcher).toContain(`release=${sha256(ANDROID_SEA)}`);
    expect(launcher).toContain("starts=1");
  });
});

describe("run, held in a mesh, as the unprivileged user", () => {
  let mesh: MeshDouble;
  beforeAll(async () => {
    mesh = await MeshDouble.start();
  });
  afterAll(async () => {
    await mesh?.stop();
  });

  it("enrols, applies what is pushed (owner ignored, said), repairs drift, refuses a service, undeclares, and exits 0", async () => {
    const node = "droid-run";
    const base = owned("root/etc", "state");
    const root = join(base, "root");
    const state = join(base, "state");
    writeFileSync(join(root, "etc/motd"), "the device's own motd\n");
    if (AS_ROOT) chownSync(join(root, "etc/motd"), UID, UID);
    const flags = ["--host", "android", "--root", root, "--state", state];

    const { code, token } = await mesh.enrolmentCode(node);
    const enrol = await host(["enrol", code, ...flags]);
    expect(enrol.code, enrol.stderr).toBe(0);
    expect(`${enrol.stdout}${enrol.stderr}`).not.toContain(token);
    if (AS_ROOT) expect(statSync(join(state, "membership.json")).uid).toBe(UID);

    const child = spawnUnprivileged(
      [ANDROID_SEA, "run", ...flags, "--heartbeat-s", "1", "--redial-spread-s", "1", "--drift-s", "2"],
      {},
    );
    let output = "";
    child.stdout!.on("data", (d) => (output += d));
    child.stderr!.on("data", (d) => (output += d));
    const exited = new Promise<number | string>((resolve) =>
      child.on("exit", (c, s) => resolve(c ?? s ?? -1)),
    );
    try {
      // it reached the mesh's loopback port and read its own state
      expect((await mesh.awaitHeartbeat(1)).value).toMatchObject({ node });
      const seq = await mesh.declare(
        node,
        decl(node, [
          { id: "motd", type: "file", path: "/etc/motd", content: "held by the mesh\n" },
          {
            id: "conf",
            type: "file",
            path: "/etc/app.conf",
            content: "one\n",
            mode: "0600",
            owner: "system",
          },
        ]),
      );
      const applied = (await mesh.awaitReport(1, { node })).value!;
      expect(applied).toMatchObject({ outcome: "applied", declaration: { seq }, host: { os: "android" } });
      expect(applied.steps.find((s) => s.id === "conf")).toMatchObject({
        did: "created",
        detail: expect.stringContaining("owner/group ignored: running without root"),
      });
      expect(applied.holds).toEqual([expect.objectContaining({ path: "/etc/motd" })]);
      expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("one\n");

      // drift: the drift timer puts the managed file back and says so
      writeFileSync(join(root, "etc/app.conf"), "edited by hand\n");
      const repaired = (await mesh.awaitReport(2, { node })).value!;
      expect(repaired.steps.find((s) => s.id === "conf")).toMatchObject({ did: "repaired" });
      expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("one\n");

      // a type beyond the floor is refused by the Android host, and nothing is applied
      await mesh.declare(node, decl(node, [{ id: "svc", type: "service", unit: "x.service" }]));
      const refused = (await mesh.awaitReport(3, { node })).value!;
      expect(refused.outcome).toBe("refused");
      expect(refused.refusals).toEqual([
        { id: "svc", field: "type", reason: 'type "service": not on an Android host' },
      ]);

      // undeclared: the created file goes, the held one comes back
      await mesh.declare(node, decl(node, [], { owns_nothing: true }));
      const gone = (await mesh.awaitReport(4, { node })).value!;
      expect(gone.steps.map((s) => `${s.id}:${s.did}`).sort()).toEqual(["conf:removed", "motd:restored"]);
      expect(readFileSync(join(root, "etc/motd"), "utf8")).toBe("the device's own motd\n");
      expect(existsSync(join(root, "etc/app.conf"))).toBe(false);
      await waitFor(() => existsSync(join(state, "confirmed")), EVENT_WAIT_MS, "the confirmation");
    } finally {
      if (child.exitCode === null) child.kill("SIGTERM");
      expect(await exited).toBe(0);
    }
    expect(output).not.toContain(token);
    expect(output).not.toMatch(STACK);
    // what it left in its state is its own, and it reads it back as that user
    const status = await host(["status", "--json", ...flags]);
    expect(JSON.parse(status.stdout)).toMatchObject({
      node,
      host: "android",
      bus: { user: `node.${node}` },
      holds: [],
    });
    if (AS_ROOT) expect(statSync(join(state, "confirmed")).uid).toBe(UID);
  });
});

describe.skipIf(!MKSH)(
  "an Android node upgraded from the mesh's releases, under mksh, as the unprivileged user",
  () => {
    let mesh: MeshDouble;
    beforeAll(async () => {
      mesh = await MeshDouble.start();
    });
    afterAll(async () => {
      await mesh?.stop();
    });

    /** init's part: the launcher under mksh as the service's user, started again whenever it exits. */
    function restarting(bin: string, flags: string[]) {
      const exits: (number | string)[] = [];
      let child: ChildProcess | null = null;
      let stopping = false;
      const done = (async () => {
        while (!stopping) {
          child = spawnUnprivileged([MKSH, LAUNCH, "run", ...flags], { MESH_HOST_BIN: bin });
          child.stdout!.resume();
          child.stderr!.resume();
          const c = child;
          exits.push(
            await new Promise<number | string>((r) => c.on("exit", (code, s) => r(code ?? s ?? -1))),
          );
          if (!stopping) await new Promise((r) => setTimeout(r, 100));
        }
      })();
      const stop = async () => {
        stopping = true;
        child?.kill("SIGTERM");
        await done;
      };
      return { exits, stop };
    }

    it("fetches the android release into /data/mesh-host/bin, swaps it in as that user, exits 0; the launcher starts it and it confirms", async () => {
      const node = "droid-up";
      const base = owned("root", "state/bin", "releases");
      const [root, state] = [join(base, "root"), join(base, "state")];
      const bin = join(state, "bin/mesh-host");
      copyFileSync(ANDROID_SEA, bin);
      chmodSync(bin, 0o700);
      if (AS_ROOT) chownSync(bin, UID, UID);
      const flags = ["--host", "android", "--root", root, "--state", state];
      const { code } = await mesh.enrolmentCode(node);
      expect((await host(["enrol", code, ...flags])).code).toBe(0);
      // the next release: the Android executable with a digest of its own
      const next = join(base, "releases/mesh-host-0.2.0-android-x64");
      copyFileSync(ANDROID_SEA, next);
      writeFileSync(next, "\nmesh-host test variant 0.2.0\n", { flag: "a" });
      const manifest = await mesh.storeRelease({ file: next, version: "0.2.0", kind: "android" });
      expect(manifest).toMatchObject({ kind: "android", arch: "x64", encoding: expect.any(String) });
      const sha = (f: string) => createHash("sha256").update(readFileSync(f)).digest("hex");
      const confirmed = () => readFileSync(join(state, "confirmed"), { flag: "a+" }).toString().trim();
      const loop = restarting(bin, [
        ...flags,
        "--heartbeat-s",
        "1",
        "--redial-spread-s",
        "1",
        "--drift-s",
        "600",
      ]);
      try {
        const first = sha(bin);
        await waitFor(() => confirmed() === first, EVENT_WAIT_MS, "the installed release confirmed");
        await mesh.declare(node, {
          ...decl(node, [{ id: "f", type: "file", path: "/hello", content: "hi\n" }]),
          host: { release: "0.2.0" },
        });
        const report = (await mesh.awaitReport(1, { node })).value!;
        expect(report.steps.find((s) => s.id === "host.release")).toMatchObject({
          did: "updated",
          detail: "release 0.2.0 installed: restarting onto it",
        });
        await waitFor(
          () => confirmed() === sha(next),
          EVENT_WAIT_MS,
          "0.2.0 started by the launcher, confirmed",
        );
        expect(sha(bin)).toBe(sha(next));
        expect(loop.exits[0]).toBe(0);
        expect(readdirSync(join(state, "bin"))).toEqual(["mesh-host"]);
        if (AS_ROOT) expect(statSync(bin).uid).toBe(UID);
      } finally {
        await loop.stop();
      }
    });
  },
);
