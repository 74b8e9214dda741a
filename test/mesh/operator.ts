// Driving `mesh-host mesh …` as an operator would: the built executable, a mesh directory of the test's own,
// free ports for its servers (each with the port after it free too: the routes listen there), and `mesh up`
// known ready by the line it says, never by time.
import { join } from "node:path";
import { type CliResult, type Running, runCli, startCli } from "../support/cli.ts";

const UP_READY = "mesh up:";
const UP_WAIT_MS = 120_000;

export { freePortPairs } from "../support/ports.ts";

export function mesh(
  dir: string,
  args: string[],
  opts: { input?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<CliResult> {
  return runCli(["mesh", "--mesh", dir, ...args], opts);
}

/** A command's output until `check` holds, or a clear failure with what it said. */
export async function awaitOutput(
  running: Running,
  check: (out: { stdout: string; stderr: string }) => boolean,
  what: string,
  ms = UP_WAIT_MS,
): Promise<void> {
  const deadline = Date.now() + ms;
  let exited: number | string | null = null;
  void running.exited.then((c) => (exited = c));
  while (!check(running.output())) {
    if (exited !== null || Date.now() > deadline) {
      const { stdout, stderr } = running.output();
      throw new Error(
        `no ${what} (${exited !== null ? `exited ${exited}` : "timed out"}):\n${stdout}\n${stderr}`,
      );
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** `mesh up` (all servers, or `extra` flags), resolved once it says the mesh is up. */
export async function meshUp(dir: string, extra: string[] = []): Promise<Running> {
  const up = startCli(["mesh", "--mesh", dir, "up", ...extra]);
  try {
    await awaitOutput(up, (o) => o.stdout.includes(UP_READY), `"${UP_READY}" from mesh up`);
  } catch (e) {
    await up.stop("SIGKILL");
    throw e;
  }
  return up;
}

export function serverDir(dir: string, i: number): string {
  return join(dir, "servers", String(i));
}

/** `mesh init` with a server on each port given; throws with what it said when it does not exit 0. */
export async function initMesh(dir: string, ports: number[]): Promise<void> {
  const r = await mesh(dir, ["init", ...ports.flatMap((p) => ["--server", `127.0.0.1:${p}`])]);
  if (r.code !== 0) throw new Error(`mesh init exited ${r.code}: ${r.stderr}`);
}

/**
 * A set-up step (not the behaviour under test) run again when the bus refused the controller's CONNECT while a
 * server was reloading its user list: nats-server 2.9 answers a CONNECT that lands mid-reload with an
 * authentication error ("User \"\"" in its log), seen when a node add follows an enrolment's reload closely.
 */
export async function meshSetUp(dir: string, args: string[], tries = 3): Promise<CliResult> {
  for (let i = 1; ; i++) {
    const r = await mesh(dir, args);
    if (r.code === 0 || i >= tries || !r.stderr.includes("Authorization Violation")) return r;
  }
}

/**
 * One of two pushes raced to one node (`push --json`'s row): applied; superseded by the other; published after the
 * other's newer serial, refused by the node's signed order as older than the newest it accepted; or, the older of
 * the two, replaced on the bus by the newer before the node took it (DECLARE keeps one declaration a node, newest
 * wins), so never delivered and never reported — never a refusal for anything else.
 */
export function heldOrder(
  row: {
    serial: number;
    report?: { outcome: string; refusals?: { reason: string }[] } | null;
  },
  newest: number,
): void {
  const outcome = row.report?.outcome;
  if (outcome === "applied" || outcome === "superseded") return;
  if (!row.report && row.serial < newest) return;
  const reasons = (row.report?.refusals ?? []).map((r) => r.reason).join("; ");
  if (outcome === "refused" && new RegExp(`^serial ${row.serial} is older than \\d+`).test(reasons)) return;
  throw new Error(`serial ${row.serial}: ${outcome ?? "no report"} (${reasons})`);
}
