// The launcher before enrolment, under every shell it must run in: `launch run` on a node not enrolled yet says
// so once and waits, looking now and then, without starting the host (which would exit 2 and be restarted by
// the init for ever); once enrol has written its files it starts the host. Other commands are not held.
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LAUNCH, machine, SHELLS, shellPath, until } from "../support/launcher.ts";
import { spawnGroup } from "../support/processes.ts";

describe.each(SHELLS)("the launcher before enrolment, under %s", (shell) => {
  it("waits quietly for enrolment before `run`, one line, then starts the host once enrol wrote its files", async () => {
    const m = machine(shell, { enrolled: false });
    m.install(m.standIn("v1", "unconfirmed"));
    const log = join(m.base, "log");
    // a `sleep` that counts itself: each poll is an event the test can wait for
    const tools = join(m.base, "tools");
    const polls = join(m.base, "polls");
    mkdirSync(tools);
    writeFileSync(join(tools, "sleep"), `#!/bin/sh\necho "$1" >> '${polls}'\nexec /bin/sleep "$@"\n`);
    chmodSync(join(tools, "sleep"), 0o755);
    const pollCount = () => (existsSync(polls) ? readFileSync(polls, "utf8").split("\n").length - 1 : 0);
    // a group the test process ends: a launcher left waiting for enrolment would poll for ever
    const child = spawnGroup(shellPath(shell), [LAUNCH, "run", "--state", m.state], {
      env: { PATH: `${tools}:${process.env.PATH}`, MESH_HOST_BIN: m.bin, MESH_HOST_ENROL_POLL_S: "1" },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr!.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
    // three polls go by: nothing is started and nothing more is said
    await until(() => pollCount() >= 3);
    expect(existsSync(log)).toBe(false);
    expect(stderr.trim().split("\n")).toEqual([
      `mesh-host-launch: this node is not enrolled yet (no membership in ${m.state}): waiting for \`mesh-host enrol\` (the code on its standard input)`,
    ]);
    expect(readFileSync(polls, "utf8").split("\n")[0]).toBe("1");
    // enrol writes the membership first: with the node's name still missing it keeps waiting
    mkdirSync(m.state, { recursive: true });
    writeFileSync(join(m.state, "membership.json"), "{}\n");
    const seen = pollCount();
    await until(() => pollCount() >= seen + 2);
    expect(existsSync(log)).toBe(false);
    writeFileSync(join(m.state, "node.json"), "{}\n");
    expect(await exited).toBe(0);
    expect(readFileSync(log, "utf8")).toContain("ran=v1");
    expect(stderr).toContain("enrolled: starting the host");
    expect(m.launcherState()).toMatchObject({ starts: "1" });
  });

  it("holds only `run`: another command runs at once on a node not enrolled", () => {
    const m = machine(shell, { enrolled: false });
    m.install(m.standIn("v1", "unconfirmed"));
    const s = m.start({}, ["status"]);
    expect(s.ran).toBe("v1");
    expect(s.stderr).not.toContain("not enrolled");
  });
});
