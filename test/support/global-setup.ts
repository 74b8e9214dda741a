// vitest's global setup: names this test run in the environment every test process and everything they start
// inherits, and at the end fails the run when a host, a bus, a runtime, a tunnel or a machine it started is
// still running. Those are SIGKILLed then, so none outlives the run; MESH_STRAYS_FILE (.ci/run) gets their list.
import { randomBytes } from "node:crypto";
import { appendFileSync } from "node:fs";
import { describeStrays, GONE_WAIT_MS, killStrays, lingering, RUN_MARKER } from "./strays.ts";

export function setup(): void {
  process.env[RUN_MARKER] ||= `vitest-${process.pid}-${randomBytes(4).toString("hex")}`;
}

export async function teardown(): Promise<void> {
  const strays = await lingering(process.env[RUN_MARKER]!, GONE_WAIT_MS);
  if (!strays.length) return;
  const list = describeStrays(strays);
  killStrays(strays);
  if (process.env.MESH_STRAYS_FILE) appendFileSync(process.env.MESH_STRAYS_FILE, `${list}\n`);
  // vitest reports a throw here but keeps its exit status: the run fails by this
  process.exitCode = 1;
  throw new Error(`the tests left ${strays.length} process(es) running (now SIGKILLed):\n${list}`);
}
