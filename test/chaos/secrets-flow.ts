// Scenario 7, the full flow: enrol with a known token, a membership with a known password, sealed secrets
// delivered over the bus, a failing action, a heartbeat, a SIGKILL mid-apply, a drift repaired while the bus is
// away (its report in the outbox). None of the values may appear in a log line, stdout, stderr, a report or a
// heartbeat at the double, the outbox, or the state (outside identity/ and the membership).

import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { loadKeys, publicKeys } from "../../src/store/index.ts";
import { seal } from "../../src/vocabulary/index.ts";
import { untilFileArgv } from "../support/events.ts";
import { BusNode, permissionProblems, until, withMesh } from "./bus.ts";
import { leakedForm, type Outcome, type RunOptions, type Scenario, Tally } from "./support.ts";

const PATH = "/etc/db.pass";

/** Every file under `dir`, except what `skip` names, as [relative path, bytes]. */
function filesUnder(dir: string, skip: (rel: string) => boolean): [string, Buffer][] {
  const out: [string, Buffer][] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const abs = join(d, name);
      const rel = relative(dir, abs);
      if (skip(rel)) continue;
      if (statSync(abs).isDirectory()) walk(abs);
      else out.push([rel, readFileSync(abs)]);
    }
  };
  walk(dir);
  return out;
}

async function flow(n: number): Promise<{ problems: string[]; checked: number }> {
  return await withMesh(async (mesh) => {
    const node = await BusNode.enrolled(mesh, `keeper${n}`);
    const keys = loadKeys(node.state);
    if (!keys.ok) return { problems: [keys.reason], checked: 0 };
    const sealing = publicKeys(keys.keys).sealing;
    const secrets = [0, 1].map((i) => `chaos-secret-${i}-${randomBytes(12).toString("hex")}`);
    const declaration = (value: string, extra: object[]) => ({
      v: 1,
      node: node.name,
      mode: "converged",
      secrets: { db: seal(Buffer.from(value), sealing) },
      resources: [{ id: "dbpass", type: "file", path: PATH, secret: "db", mode: "0600" }, ...extra],
    });
    const problems: string[] = [];
    const outboxSeen: [string, Buffer][] = [];
    try {
      await node.start({ level: "debug", driftS: 2 });
      // a failing action after the secret: the report says failed, with the action's output tail
      const s1 = await mesh.declare(
        node.name,
        declaration(secrets[0]!, [
          { id: "fails", type: "action", run: ["sh", "-c", "echo failing >&2; exit 4"] },
        ]),
      );
      const r1 = await node.report(s1, "failed");
      if (typeof r1 === "string") problems.push(r1);
      if (!(await until(() => mesh.heartbeats.some((h) => h.subject === `mesh.heartbeat.${node.name}`))))
        problems.push(`no heartbeat arrived: ${node.runTail()}`);
      // a new secret, and the host killed while the action after it runs
      const s2 = await mesh.declare(
        node.name,
        declaration(secrets[1]!, [{ id: "slow", type: "action", run: untilFileArgv(node.gate("s2")) }]),
      );
      if (!(await until(() => node.fileText(PATH) === secrets[1])))
        problems.push(`the second secret was never written: ${node.runTail()}`);
      await node.kill();
      node.release("s2");
      await node.start({ level: "debug", driftS: 2 });
      const r2 = await node.report(s2, "applied");
      if (typeof r2 === "string") problems.push(r2);
      // the redelivery of s2 applied and acked before the bus goes: what follows is the drift check's alone
      problems.push(...(await node.settled()));
      // the bus away, the file changed by hand: the drift check puts it back and its report waits on disk
      await mesh.stopServer();
      writeFileSync(join(node.root, PATH), "changed by hand\n");
      if (!(await until(() => node.fileText(PATH) === secrets[1] && node.outbox().length > 0)))
        problems.push("the drift was not repaired into an outbox report while the bus was away");
      outboxSeen.push(...filesUnder(join(node.state, "outbox"), () => false));
      await mesh.startServer();
      if (!(await until(() => node.outbox().length === 0)))
        problems.push("the outbox did not drain after the bus came back");
      await node.cli(["status", "--json"]);
      await node.cli(["reconcile", "--dry-run", "--json"]);
      problems.push(...(await node.stop()));
    } finally {
      await node.kill();
    }
    if (node.fileText(PATH) !== secrets[1]) problems.push(`${PATH} does not hold the declared secret`);
    if ((statSync(join(node.root, PATH)).mode & 0o777) !== 0o600) problems.push(`${PATH} is not mode 0600`);
    problems.push(...permissionProblems(mesh, node.name));
    // everywhere a value could leak
    const places: [string, Buffer | string][] = [
      ...node.outputs.map((text, i) => [`output ${i} of the CLI`, text] as [string, string]),
      ...node
        .reports()
        .map((r) => [`report seq ${r.seq} at the double`, Buffer.from(r.data)] as [string, Buffer]),
      ...mesh.heartbeats
        .filter((h) => h.subject === `mesh.heartbeat.${node.name}`)
        .map((h) => ["a heartbeat at the double", Buffer.from(h.data)] as [string, Buffer]),
      ...outboxSeen.map(([rel, b]) => [`the outbox's ${rel}`, b] as [string, Buffer]),
      ...filesUnder(
        node.state,
        (rel) => rel === "identity" || /^membership(\.previous)?\.json$/.test(rel),
      ).map(([rel, b]) => [`the state's ${rel}`, b] as [string, Buffer]),
    ];
    const values: [string, string][] = [
      ["the enrolment token", node.token],
      ["the membership password", node.password],
      ...secrets.map((s, i) => [`secret ${i + 1}`, s] as [string, string]),
    ];
    let checked = 0;
    for (const [what, value] of values)
      for (const [where, content] of places) {
        checked++;
        const form = leakedForm(content, value);
        if (form) problems.push(`${what} appears in ${where} ${form}`);
      }
    return { problems: [...new Set(problems)], checked };
  });
}

export const secretsFullFlow: Scenario = {
  key: "secrets-flow",
  title: "7 secrets (enrol, bus, failure, crash, outbox)",
  async run(opts: RunOptions): Promise<Outcome> {
    const tally = new Tally();
    const rounds = opts.long ? 2 : 1;
    let checked = 0;
    for (let n = 0; n < rounds; n++) {
      await tally.try(`flow ${n}`, async () => {
        const r = await flow(n);
        checked += r.checked;
        return r.problems;
      });
      opts.progress?.(`secrets-flow ${n + 1}/${rounds}`);
    }
    tally.notes.push(
      `${checked} (value, place) pairs searched, each as text, base64, hex and a JSON byte array`,
    );
    return tally.outcome();
  },
};
