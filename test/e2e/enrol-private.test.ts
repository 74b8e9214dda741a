// The enrolment is private (protocol.md, "Enrolment"), attacked as issue 18 found it, through the real
// executable and a real nats-server: another local user reads the enrolling process's argv from /proc, and
// whoever holds the token listens on the answer's inbox.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { dial } from "../../src/link/index.ts";
import { decodeCode } from "../../src/vocabulary/index.ts";
import { EVENT_WAIT_MS, type MeshDouble, waitFor } from "../mesh/index.ts";
import { cliCommand, runCli } from "../support/cli.ts";
import { meshForFile } from "../support/mesh-file.ts";
import { killGroup, spawnGroup } from "../support/processes.ts";
import { tempDir } from "../support/tmp.ts";

let mesh: MeshDouble;
meshForFile((m) => {
  mesh = m;
});

function dirs() {
  const base = tempDir();
  const root = join(base, "root");
  mkdirSync(root);
  return { base, state: join(base, "state"), root };
}

/**
 * `enrol` started with `args` and `input` on stdin, against a mesh that keeps it waiting for an answer; once its
 * question has arrived (the token is in use), another user (nobody) reads its /proc/<pid>/cmdline.
 */
async function cmdlineWhileEnrolling(node: string, how: "stdin" | "file" | "argv") {
  const { code, token } = await mesh.enrolmentCode(node);
  mesh.setEnrolPolicy(node, { answer: "ignore" });
  const d = dirs();
  const codeFile = join(d.base, "code");
  writeFileSync(codeFile, `  ${code}\n\n`, { mode: 0o600 });
  const given = how === "argv" ? [code] : how === "file" ? ["--code-file", codeFile] : [];
  const [cmd, ...pre] = cliCommand();
  // a group of its own: through tsx the host is tsx's child, which a SIGKILL of tsx alone would leave running
  const child = spawnGroup(cmd!, [...pre, "enrol", ...given, "--state", d.state, "--root", d.root], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (b) => (stderr += b));
  child.stdin!.on("error", () => {}).end(how === "stdin" ? `\n  ${code}  \n` : "");
  const exited = new Promise((r) => child.on("close", r));
  const before = mesh.enrolments.length;
  try {
    await waitFor(
      () => mesh.enrolments.slice(before).some((e) => e.question?.node === node),
      EVENT_WAIT_MS,
      "the question",
    );
    const read = spawnSync(
      "setpriv",
      ["--reuid=65534", "--regid=65534", "--clear-groups", "cat", `/proc/${child.pid}/cmdline`],
      { encoding: "utf8" },
    );
    expect(read.status, read.stderr).toBe(0);
    return { cmdline: read.stdout.split("\0").join(" "), token, stderr: () => stderr };
  } finally {
    killGroup(child.pid!);
    await exited;
  }
}

describe("the enrolment code is private", () => {
  it("given on standard input, another user reading /proc/<pid>/cmdline finds no token", async () => {
    const seen = await cmdlineWhileEnrolling("priv-stdin", "stdin");
    expect(seen.cmdline).toContain("enrol");
    expect(seen.cmdline).not.toContain(seen.token);
    expect(seen.stderr()).not.toContain("warning");
  });

  it("given with --code-file, another user reading /proc/<pid>/cmdline finds no token", async () => {
    const seen = await cmdlineWhileEnrolling("priv-file", "file");
    expect(seen.cmdline).toContain("--code-file");
    expect(seen.cmdline).not.toContain(seen.token);
  });

  it("given on argv (still taken), another user finds it there, and stderr says so", async () => {
    const seen = await cmdlineWhileEnrolling("priv-argv", "argv");
    // the code carries the token base64url-encoded: the code itself is what argv shows
    expect(seen.cmdline).toMatch(/enrol mesh1\./);
    expect(seen.stderr()).toContain(
      "warning: the enrolment token was given on the command line, where every local user can read it",
    );
  });

  it("enrols from standard input and from --code-file, white space around the code not part of it", async () => {
    for (const [node, how] of [
      ["code-stdin", "stdin"],
      ["code-file", "file"],
    ] as const) {
      const { code, token } = await mesh.enrolmentCode(node);
      const d = dirs();
      const file = join(d.base, "code");
      writeFileSync(file, `\n${code}\r\n`);
      const flags = ["--state", d.state, "--root", d.root];
      const r =
        how === "stdin"
          ? await runCli(["enrol", ...flags], { input: ` ${code}\n` })
          : await runCli(["enrol", "--code-file", file, ...flags]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain(`enrolled ${node} as node.${node}`);
      expect(`${r.stdout}${r.stderr}`).not.toContain(token);
      expect(r.stderr).not.toContain("warning");
    }
  });

  it("enrols from the code's parts one by one: its credential (JWT and seed) on standard input, or a NATS .creds body", async () => {
    for (const [node, form] of [
      ["parts-line", "line"],
      ["parts-creds", "creds"],
    ] as const) {
      const { code, token } = await mesh.enrolmentCode(node);
      const parts = decodeCode(code);
      if (!parts.ok || !("jwt" in parts.value)) throw new Error("the double's code is not a v2 code");
      const { jwt, seed, servers, fingerprint } = parts.value;
      const credential =
        form === "line"
          ? `${jwt} ${seed}\n`
          : [
              "-----BEGIN NATS USER JWT-----",
              jwt,
              "------END NATS USER JWT------",
              "",
              "************************* IMPORTANT *************************",
              "NKEY Seed printed below can be used to sign and prove identity.",
              "",
              "-----BEGIN USER NKEY SEED-----",
              seed,
              "------END USER NKEY SEED------",
              "",
            ].join("\n");
      const d = dirs();
      const byParts = [
        "--node",
        node,
        ...servers.flatMap((s) => ["--server", s]),
        "--fingerprint",
        fingerprint,
      ];
      const r = await runCli(["enrol", ...byParts, "--state", d.state, "--root", d.root], {
        input: credential,
      });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain(`enrolled ${node} as node.${node}`);
      expect(`${r.stdout}${r.stderr}`).not.toContain(token);
      expect(r.stderr).not.toContain("warning");
    }
    // a credential the bus does not take (a seed of another key): refused by the bus, in our words, never quoted
    const { code } = await mesh.enrolmentCode("parts-wrong");
    const parts = decodeCode(code);
    if (!parts.ok || !("jwt" in parts.value)) throw new Error("the double's code is not a v2 code");
    const other = decodeCode((await mesh.enrolmentCode("parts-other")).code);
    if (!other.ok || !("seed" in other.value)) throw new Error("the double's code is not a v2 code");
    const d = dirs();
    const { servers, fingerprint, jwt } = parts.value;
    const wrong = await runCli(
      [
        "enrol",
        "--node",
        "parts-wrong",
        ...servers.flatMap((s) => ["--server", s]),
        "--fingerprint",
        fingerprint,
      ].concat(["--state", d.state, "--root", d.root]),
      { input: `${jwt} ${other.value.seed}\n` },
    );
    expect(wrong.code, wrong.stderr).toBe(2);
    // the log's own line, then the one line a person reads
    const said = wrong.stderr
      .trimEnd()
      .split("\n")
      .filter((l) => l.startsWith("mesh-host: "));
    expect(said, wrong.stderr).toHaveLength(1);
    expect(said[0]).toMatch(/the enrolment code is wrong, already used, expired or withdrawn/);
    expect(wrong.stderr).not.toContain(other.value.seed);
    expect(existsSync(join(d.state, "membership.json"))).toBe(false);
  });

  it("an empty standard input and an unreadable --code-file are refused in one line, exit 2", async () => {
    const d = dirs();
    const empty = await runCli(["enrol", "--state", d.state, "--root", d.root], { input: "  \n" });
    expect([empty.code, empty.stderr]).toEqual([
      2,
      "mesh-host: enrol reads the enrolment code from standard input (or --code-file F), and it was empty (see `mesh-host help enrol`)\n",
    ]);
    const missing = await runCli(["enrol", "--code-file", join(d.base, "nope"), "--state", d.state]);
    expect([missing.code, missing.stderr]).toEqual([
      2,
      `mesh-host: --code-file: cannot read ${join(d.base, "nope")}: it does not exist\n`,
    ]);
  });
});

describe("the enrolment answer is sealed", () => {
  it("whoever else holds the token and listens on the answer inbox reads nothing useful", async () => {
    const node = "sealed-ear";
    const { code } = await mesh.enrolmentCode(node);
    const ear = await dial({
      servers: [mesh.url],
      fingerprint: mesh.fingerprint,
      auth: mesh.enrolAuth(node, code),
      inboxPrefix: `_INBOX.enrol.${node}`,
    });
    if (!ear.ok) throw new Error(ear.reason);
    const heard: string[] = [];
    const sub = ear.nc.subscribe(`_INBOX.enrol.${node}.>`, {
      callback: (_e, m) => void heard.push(new TextDecoder().decode(m.data)),
    });
    await ear.nc.flush();
    try {
      const d = dirs();
      const r = await runCli(["enrol", "--state", d.state, "--root", d.root], { input: code });
      expect(r.code, r.stderr).toBe(0);
      // the inbox carries the stream's ack of the question too; the answer is the one with `ok`
      const answers = () => heard.map((h) => JSON.parse(h)).filter((a) => "ok" in a);
      await waitFor(() => answers().length > 0, 10_000, "the answer on the inbox");
      const password = mesh.userJwts.get(node)!;
      expect(password).toBeTruthy();
      const answer = answers()[0];
      expect(answer).toMatchObject({ v: 1, ok: true, membership: expect.stringMatching(/^v1:/) });
      expect(heard.join("")).not.toContain(password);
      // the node unsealed it with the key it made for the question
      const saved = JSON.parse(readFileSync(join(d.state, "membership.json"), "utf8")).membership;
      expect(saved.jwt).toBe(password);
      expect(saved.password).toBeUndefined();
    } finally {
      sub.unsubscribe();
      await ear.nc.close();
    }
  });

  it("an answer carrying the membership in clear is refused and nothing is saved", async () => {
    const node = "sealed-clear";
    const { code } = await mesh.enrolmentCode(node);
    mesh.setEnrolPolicy(node, { answer: "clear" });
    const d = dirs();
    const r = await runCli(["enrol", "--state", d.state, "--root", d.root], { input: code });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      "the mesh's answer carries the membership in clear: refused, it must come sealed to this node",
    );
    expect(r.stderr).not.toContain(mesh.userJwts.get(node)!);
    expect(existsSync(join(d.state, "membership.json"))).toBe(false);
  });
});
