// `npm run demo`: a real nats-server as the mesh, a node enrolled into it, two declarations pushed, each report shown.
//   --stay   keep the node and the mesh running until Ctrl-C
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Report } from "../src/vocabulary/index.ts";
import { MeshDouble } from "../test/mesh/index.ts";
import { cliCommand, runCli, startCli } from "../test/support/cli.ts";

const NODE = "demo";
const EXAMPLES = join(import.meta.dirname, "../examples");
const stay = process.argv.includes("--stay");

function say(text: string): void {
  process.stdout.write(`${text}\n`);
}

function showReport(r: Report): void {
  say(
    `  report: ${r.outcome} (declaration seq ${r.declaration.seq}, sha256:${r.declaration.digest.slice(0, 12)})`,
  );
  for (const s of r.steps) say(`    ${s.did.padEnd(9)} ${s.type.padEnd(9)} ${s.id.padEnd(9)} ${s.detail}`);
  for (const h of r.holds)
    say(`    held     ${h.path}${h.original ? ` (original sha256:${h.original.slice(0, 12)})` : ""}`);
}

async function main(): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), "mesh-demo-"));
  const root = join(base, "root");
  const state = join(base, "state");
  mkdirSync(join(root, "etc"), { recursive: true });
  writeFileSync(join(root, "etc/motd"), "the machine's own message of the day\n");
  say(`mesh-host demo — the node's machine is ${root}, its state ${state}`);
  say(`  running: ${cliCommand().at(-1)}`);
  const mesh = await MeshDouble.start();
  say(`mesh: nats-server on ${mesh.url}, TLS pinned by sha256 ${mesh.fingerprint.slice(0, 16)}…`);
  let node: ReturnType<typeof startCli> | null = null;
  const stopAll = async () => {
    await node?.stop();
    await mesh.stop();
    rmSync(base, { recursive: true, force: true });
  };
  process.once("SIGINT", () => void stopAll().then(() => process.exit(0)));
  try {
    const { code } = await mesh.enrolmentCode(NODE);
    say(
      `\n$ mesh-host enrol < code   (${code.slice(0, 12)}… on standard input: the token is never in argv nor printed)`,
    );
    const enrol = await runCli(["enrol", "--state", state, "--root", root], { input: `${code}\n` });
    say(`  ${enrol.stdout.trim() || enrol.stderr.trim()}`);
    if (enrol.code !== 0) throw new Error("enrolment failed");
    say("\n$ mesh-host run");
    node = startCli(["run", "--state", state, "--root", root, "--heartbeat-s", "2"]);
    const hb = await mesh.awaitHeartbeat(1, { timeoutMs: 20_000 });
    say(`  heartbeat from ${hb.value?.node}: version ${hb.value?.version}, uptime ${hb.value?.uptime_s} s`);
    const sent: Uint8Array[] = [];
    for (const [i, file] of ["web.json", "web-v2.json"].entries()) {
      const body = readFileSync(join(EXAMPLES, file), "utf8");
      // the double signs each with the next serial: the node refuses any older one replayed later
      sent.push(Buffer.from(JSON.stringify(mesh.sign(NODE, JSON.parse(body)))));
      const seq = await mesh.publishEnvelope(NODE, sent[i]!);
      say(`\nmesh pushes examples/${file} (signed as serial ${i + 1}, stream seq ${seq})`);
      const report = await mesh.awaitReport(i + 1, { node: NODE, timeoutMs: 20_000 });
      showReport(report.value!);
    }
    const replay = await mesh.publishEnvelope(NODE, sent[0]!);
    say(`\nsomeone on the bus replays web.json's exact signed bytes (stream seq ${replay})`);
    const refused = (await mesh.awaitReport(3, { node: NODE, timeoutMs: 20_000 })).value!;
    say(`  report: ${refused.outcome}: ${refused.refusals.map((r) => r.reason).join("; ")}`);
    const motd = join(root, "etc/motd");
    say(
      `\n/etc/motd after the mesh let it go: ${existsSync(motd) ? JSON.stringify(readFileSync(motd, "utf8")) : "(gone)"}`,
    );
    const status = await runCli(["status", "--state", state, "--root", root]);
    say(`\n$ mesh-host status\n${status.stdout.replace(/^/gm, "  ").trimEnd()}`);
    if (stay) {
      say("\nthe node and the mesh keep running; Ctrl-C stops both");
      await new Promise(() => {});
    }
  } finally {
    await stopAll();
  }
  say("\ndemo done: everything it started is stopped");
}

main().catch((e) => {
  process.stderr.write(`demo: ${(e as Error).message}\n`);
  process.exit(1);
});
