// `npm run demo`: the operator's commands and the node's, run by the built executable as a person types them —
// a mesh made and raised (a real nats-server with TLS, one account, JetStream), a node added and enrolled (its
// code handed over in a 0600 file, never on a command line), the node run, two declarations pushed, the fleet
// and the node's own status shown; and someone on the bus replaying the first declaration's exact bytes,
// which the node refuses naming both serials. Everything lives under one temporary directory and stops at the end.
//   --stay   keep the mesh and the node running until Ctrl-C
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { type Bus, connectBus, MeshDir, publishDeclaration } from "../src/mesh/index.ts";
import { Report } from "../src/vocabulary/index.ts";
import { awaitOutput, freePortPairs } from "../test/mesh/operator.ts";
import { type Running, runCli, startCli } from "../test/support/cli.ts";
import { ensureSea } from "../test/support/sea.ts";

const NODE = "demo";
const REPO = join(import.meta.dirname, "..");
const stay = process.argv.includes("--stay");
/** A bound on the wait for the fleet view to settle, never a pace: the demo moves on as soon as it has. */
const SETTLE_MS = 60_000;

function say(text: string): void {
  process.stdout.write(`${text}\n`);
}

/** Show the command as typed, run it, show what it said; stop the demo if it failed. */
async function type(args: string[], env: Record<string, string> = {}): Promise<string> {
  say(`\n$ mesh-host ${args.join(" ")}`);
  const r = await runCli(args, { env });
  const out = `${r.stdout}${r.code === 0 ? "" : r.stderr}`.trimEnd();
  if (out) say(out.replace(/^/gm, "  "));
  if (r.code !== 0) throw new Error(`mesh-host ${args[0]} ${args[1] ?? ""} exited ${r.code}`);
  return r.stdout;
}

/** A long-running command, shown as typed with `&`, returned once it says `ready`. */
async function background(
  args: string[],
  ready: (o: { stdout: string; stderr: string }) => boolean,
  what: string,
): Promise<Running> {
  say(`\n$ mesh-host ${args.join(" ")} &`);
  const r = startCli(args);
  await awaitOutput(r, ready, what);
  return r;
}

/**
 * Someone who can publish on the bus (a leaked controller credential, the bus's operator) replays the first
 * declaration's exact signed bytes: the signature holds, the serial is older, and the node refuses it.
 */
async function replay(bus: Bus, first: Uint8Array, up: Running): Promise<void> {
  const report = new Promise<Report>((resolve) => {
    const sub = bus.nc.subscribe(`mesh.report.${NODE}`, {
      callback: (_e, m) => {
        // a signed node message (protocol.md): the report is its body; `mesh up` is the one that verifies it
        const signed = JSON.parse(new TextDecoder().decode(m.data)) as { body?: string };
        const r = Report.safeParse(JSON.parse(signed.body ?? "null"));
        if (r.success && r.data.outcome === "refused") {
          sub.unsubscribe();
          resolve(r.data);
        }
      },
    });
  });
  await bus.nc.flush();
  // replayed as the bus would carry a push: stored, then woken
  await publishDeclaration(bus, NODE, first);
  say("\nsomeone on the bus replays web.json's exact signed bytes (serial 1)");
  const refused = await report;
  say(`  report: ${refused.outcome}: ${refused.refusals.map((r) => r.reason).join("; ")}`);
  await awaitOutput(
    up,
    (o) => o.stderr.includes(`node ${NODE} refused serial 1`),
    "mesh up saying the refusal",
  );
  const line = up
    .output()
    .stderr.split("\n")
    .find((l) => l.includes(`node ${NODE} refused serial 1`));
  say(`  and mesh up says: ${line}`);
}

/**
 * Until the fleet view holds what the node holds now (the second push applied, its binary confirmed by the
 * first reconcile after its start): `mesh nodes` then shows the node as it is, not as it was a heartbeat ago.
 */
async function fleetSettled(meshDir: string): Promise<void> {
  const deadline = Date.now() + SETTLE_MS;
  while (Date.now() < deadline) {
    const r = await runCli(["mesh", "nodes", "--mesh", meshDir, "--json"]);
    const row = JSON.parse(r.stdout).nodes[0];
    if (row?.report?.serial === 2 && row.confirmed) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function main(): Promise<void> {
  process.env.MESH_HOST_BIN ??= ensureSea();
  const base = mkdtempSync(join(tmpdir(), "mesh-demo-"));
  const meshDir = join(base, "mesh");
  const root = join(base, "root");
  const state = join(base, "state");
  mkdirSync(join(root, "etc"), { recursive: true });
  writeFileSync(join(root, "etc/motd"), "the machine's own message of the day\n");
  const [port] = await freePortPairs(1);
  say(`mesh-host demo: everything under ${base}`);
  say(`  the executable: ${relative(REPO, process.env.MESH_HOST_BIN!)}; the node's machine is ${root}`);
  const started: Running[] = [];
  const stopAll = async () => {
    while (started.length) await started.pop()!.stop();
    rmSync(base, { recursive: true, force: true });
  };
  process.once("SIGINT", () => void stopAll().then(() => process.exit(0)));
  try {
    say("\n# the operator's machine: a mesh of one server");
    await type(["mesh", "init", "--mesh", meshDir, "--server", `127.0.0.1:${port}`]);
    const up = await background(
      ["mesh", "up", "--mesh", meshDir],
      (o) => o.stdout.includes("mesh up:"),
      "mesh up",
    );
    started.push(up);
    say(up.output().stdout.trimEnd().replace(/^/gm, "  "));
    const codeFile = join(base, `${NODE}.code`);
    await type(["mesh", "node", "add", NODE, "--mesh", meshDir, "--code-file", codeFile]);

    say(
      "\n# the node's machine: the code file carried over (it holds a one-time token: never on a command line)",
    );
    await type(["enrol", "--code-file", codeFile, "--state", state, "--root", root]);
    const run = await background(
      ["run", "--state", state, "--root", root, "--heartbeat-s", "2"],
      (o) => o.stderr.includes('"link up"'),
      "the node's link",
    );
    started.push(run);
    say("  (holding the node in its mesh: the link is up)");

    say("\n# the operator pushes a declaration, then a second one that lets /etc/motd go");
    const bus = await connectBus(new MeshDir(meshDir), { name: "demo: someone on the bus" });
    const sent: Uint8Array[] = [];
    bus.nc.subscribe(`mesh.declare.${NODE}`, {
      callback: (_e, m) => {
        sent.push(Uint8Array.from(m.data));
      },
    });
    await bus.nc.flush();
    for (const file of ["examples/web.json", "examples/web-v2.json"])
      await type(["mesh", "push", NODE, file, "--mesh", meshDir]);
    await replay(bus, sent[0]!, up);
    await bus.close();
    say(
      `\n/etc/motd after the mesh let it go: ${JSON.stringify(readFileSync(join(root, "etc/motd"), "utf8"))}`,
    );
    await fleetSettled(meshDir);
    await type(["mesh", "nodes", "--mesh", meshDir]);
    await type(["status", "--state", state, "--root", root]);
    if (stay) {
      say(`\nthe mesh and the node keep running (MESH_DIR=${meshDir}); Ctrl-C stops both`);
      await new Promise(() => {});
    }
  } finally {
    await stopAll();
  }
  say("\ndemo done: everything it started is stopped");
  say(tryNext());
}

/** What to try next: the README's own commands, read from it so the two cannot differ. */
export function tryNext(readme = readFileSync(join(REPO, "README.md"), "utf8")): string {
  const block = (heading: string) => {
    const at = readme.indexOf(`\n${heading}\n`);
    const m = at < 0 ? null : /^```sh\n([\s\S]*?)^```$/m.exec(readme.slice(at));
    return m ? m[1]!.trimEnd().replace(/^/gm, "  ") : "";
  };
  return [
    "\nwhat to try next (from README.md):",
    "\n# a first apply, offline: no mesh, no root",
    block("## A first apply offline"),
    "\n# a first mesh in six commands, on this machine",
    block("## A first mesh in six commands"),
    "\nthen: `mesh-host help`, `mesh-host mesh COMMAND --help`, and docs/ (README.md says which file is for what)",
  ].join("\n");
}

if (process.argv[1]?.endsWith("demo.ts"))
  main().catch((e) => {
    process.stderr.write(`demo: ${(e as Error).message}\n`);
    process.exit(1);
  });
