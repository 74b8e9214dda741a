// Scenario 3, bus faults: the server down at start, killed mid-apply, restarted; the node killed mid-apply; a
// three-node JetStream cluster whose leader is killed (cluster.ts). After each the next declaration applies;
// nothing is applied twice in a way that changes the outcome; every report the node made arrives.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { State, StoreOriginals } from "../../src/store/index.ts";
import type { MeshDouble } from "../mesh/index.ts";
import { untilFileArgv } from "../support/events.ts";
import { BusNode, permissionProblems, serverPid, until, withMesh } from "./bus.ts";
import { clusterLeaderKilled } from "./cluster.ts";
import { type Outcome, type RunOptions, type Scenario, Tally, tempsUnder } from "./support.ts";

/** What `run` logs each time a dial fails or a link drops. */
const LINK_LOST = "link lost or refused";

/**
 * A declaration: ten files saying `tag`; when f0 changes a slow action (the window to kill in, open until the
 * test calls `node.release(tag)`) and a counter.
 */
export function busDeclaration(node: BusNode, tag: string, slow = false): object {
  const log = join(node.base, "actions.log");
  return {
    v: 1,
    node: node.name,
    mode: "converged",
    resources: [
      { id: "bus", type: "directory", path: "/srv/bus", mode: "0755" },
      ...Array.from({ length: 10 }, (_, i) => ({
        id: `f${i}`,
        type: "file",
        path: `/srv/bus/f${i}`,
        content: `${tag} ${i}\n`,
        mode: "0644",
      })),
      ...(slow ? [{ id: "slow", type: "action", on: ["f0"], run: untilFileArgv(node.gate(tag)) }] : []),
      { id: "count", type: "action", on: ["f0"], run: ["sh", "-c", `echo ${tag} >> ${log}`] },
    ],
  };
}

/** The machine says `tag`, everywhere the declaration put it. */
export function machineSays(node: BusNode, tag: string): string[] {
  const wrong = Array.from({ length: 10 }, (_, i) => i).filter(
    (i) => node.fileText(`/srv/bus/f${i}`) !== `${tag} ${i}\n`,
  );
  return wrong.length
    ? [
        `${wrong.length} files are not ${tag}'s (f${wrong[0]} is ${JSON.stringify(node.fileText(`/srv/bus/f${wrong[0]}`))})`,
      ]
    : [];
}

function actionRuns(node: BusNode): string[] {
  try {
    return readFileSync(join(node.base, "actions.log"), "utf8").trim().split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

/**
 * The temp files under the node's root and state (the outbox's own are its queue, not debris), as paths that
 * say which tree they are in.
 */
function nodeTemps(node: BusNode): string[] {
  return [
    ...tempsUnder(node.root).map((t) => `root:${t}`),
    ...tempsUnder(node.state)
      .filter((t) => !t.startsWith("/outbox/"))
      .map((t) => `state:${t}`),
  ];
}

/**
 * The state as the next start reads it, and none of the temp files the kill left (`leftByKill`) still there once
 * the node applied again. Only those: the running node writes last.json after every apply, a drift check's
 * too, so a temp file of its own may be there for the instant this looks (a clean-clone run saw one).
 */
function stateSound(node: BusNode, leftByKill: string[]): string[] {
  const problems: string[] = [];
  try {
    const state = new State(node.state);
    state.readRecords();
    state.readNode();
    state.readDeclared();
    new StoreOriginals(state).list();
  } catch (e) {
    problems.push(`the state does not parse: ${(e as Error).message}`);
  }
  const now = new Set(nodeTemps(node));
  const temps = leftByKill.filter((t) => now.has(t));
  if (temps.length)
    problems.push(`temp files the kill left are still there: ${temps.slice(0, 3).join(", ")}`);
  return problems;
}

interface Life {
  node: BusNode;
  /** Tags applied, in order: each one's `count` action must have run (at least once). */
  applied: string[];
  notes: string[];
}

async function declareAndExpect(mesh: MeshDouble, life: Life, tag: string, slow = false): Promise<string[]> {
  const seq = await mesh.declare(life.node.name, busDeclaration(life.node, tag, slow));
  const report = await life.node.report(seq, "applied");
  life.applied.push(tag);
  return [...(typeof report === "string" ? [report] : []), ...machineSays(life.node, tag)];
}

async function serverDownAtStart(mesh: MeshDouble, life: Life, n: number): Promise<string[]> {
  await mesh.stopServer();
  const host = await life.node.start();
  // the bus away for two of its dials: run must still be there, trying again
  const problems: string[] = [];
  if (!(await until(() => life.node.loggedCount(LINK_LOST) >= 2 || host.child.exitCode !== null)))
    problems.push(`run never said it tried the absent bus twice: ${life.node.runTail()}`);
  if (host.child.exitCode !== null)
    problems.push(`run exited while the bus was away: exit ${host.child.exitCode}`);
  await mesh.startServer();
  problems.push(...(await declareAndExpect(mesh, life, `down-${n}`)));
  return problems;
}

async function serverKilledMidApply(mesh: MeshDouble, life: Life, n: number): Promise<string[]> {
  const tag = `midserver-${n}`;
  const seq = await mesh.declare(life.node.name, busDeclaration(life.node, tag, true));
  // the files are written and the slow action runs: the apply holds the lock
  if (!(await until(() => life.node.fileText("/srv/bus/f9") === `${tag} 9\n`)))
    return [`the node never started applying ${tag}: ${life.node.runTail()}`];
  process.kill(serverPid(mesh.server.confFile), "SIGKILL");
  // started again only once this one is gone: a start while it still runs would start nothing
  if (!(await until(() => !mesh.server.running))) return ["the SIGKILLed server never exited"];
  life.node.release(tag);
  const problems: string[] = [];
  // the apply finishes with the bus away: its report waits on disk
  if (!(await until(() => life.node.outbox().length > 0)))
    problems.push(`no report waited in the outbox: ${life.node.runTail()}`);
  await mesh.startServer();
  const report = await life.node.report(seq, "applied");
  if (typeof report === "string") problems.push(report);
  life.applied.push(tag);
  problems.push(...machineSays(life.node, tag));
  return problems;
}

async function nodeKilledMidApply(mesh: MeshDouble, life: Life, n: number): Promise<string[]> {
  const tag = `midnode-${n}`;
  const seq = await mesh.declare(life.node.name, busDeclaration(life.node, tag, true));
  if (!(await until(() => life.node.fileText("/srv/bus/f9") === `${tag} 9\n`)))
    return [`the node never started applying ${tag}: ${life.node.runTail()}`];
  await life.node.kill();
  const leftByKill = nodeTemps(life.node);
  // the restart runs the owed slow action again: it ends at once now
  life.node.release(tag);
  await life.node.start();
  // redelivered once the ack wait runs out, and applied again: nothing left to change. The report may be the
  // start's reconcile of the kept declaration; the state is judged once the redelivery is acked too, not
  // while that apply is still writing it
  const report = await life.node.report(seq, "applied");
  life.applied.push(tag);
  const settled = await life.node.settled();
  return [
    ...(typeof report === "string" ? [report] : []),
    ...settled,
    ...machineSays(life.node, tag),
    ...stateSound(life.node, leftByKill),
  ];
}

async function serverRestarted(mesh: MeshDouble, life: Life, n: number): Promise<string[]> {
  await mesh.restartServer();
  return await declareAndExpect(mesh, life, `restart-${n}`);
}

/** Over the node's whole life: no report lost, no declaration applied twice to another outcome, every action ran. */
function accounting(life: Life): string[] {
  const problems = life.node.lostReports();
  const bySeq = new Map<number, string[][]>();
  const seen = new Set<string>();
  let duplicates = 0;
  for (const r of life.node.reports()) {
    const v = r.value;
    if (!v) {
      problems.push(`a report did not parse: ${r.problem}`);
      continue;
    }
    // the same report twice (resent after a lost ack, and the server's dedupe window lost with its restart)
    const bytes = Buffer.from(r.data).toString("base64");
    if (seen.has(bytes)) {
      duplicates++;
      continue;
    }
    seen.add(bytes);
    const list = bySeq.get(v.declaration.seq) ?? [];
    list.push(v.steps.filter((s) => s.type !== "action").map((s) => s.did));
    bySeq.set(v.declaration.seq, list);
  }
  for (const [seq, applications] of bySeq)
    for (const later of applications.slice(1))
      if (later.some((d) => d !== "unchanged"))
        problems.push(`seq ${seq} was applied again and changed the machine (${later.join(",")})`);
  if (duplicates)
    life.notes.push(`${duplicates} report(s) arrived twice, byte for byte (resent after a lost ack)`);
  const ran = actionRuns(life.node);
  for (const tag of life.applied)
    if (!ran.includes(tag))
      problems.push(
        `the action \`on\` f0 never ran for ${tag}, though f0 changed (a kill between the change and the action)`,
      );
  return problems;
}

export const busFaults: Scenario = {
  key: "bus-faults",
  title: "3 bus faults (server down, killed, restarted; node killed; cluster leader killed)",
  async run(opts: RunOptions): Promise<Outcome> {
    const tally = new Tally();
    const rounds = opts.long ? 3 : 1;
    await withMesh(async (mesh) => {
      const node = await BusNode.enrolled(mesh, "faults");
      const life: Life = { node, applied: [], notes: tally.notes };
      try {
        for (let n = 0; n < rounds; n++) {
          if (!node.host) await node.start();
          const first = await declareAndExpect(mesh, life, `first-${n}`);
          await tally.try(`round ${n}: a first declaration`, () => first);
          await node.stop();
          await tally.try(`round ${n}: the server down when run starts`, () =>
            serverDownAtStart(mesh, life, n),
          );
          await tally.try(`round ${n}: the server killed mid-apply`, () =>
            serverKilledMidApply(mesh, life, n),
          );
          await tally.try(`round ${n}: the node killed mid-apply`, () => nodeKilledMidApply(mesh, life, n));
          await tally.try(`round ${n}: the server restarted while the node is idle`, () =>
            serverRestarted(mesh, life, n),
          );
          opts.progress?.(`bus-faults round ${n + 1}/${rounds}`);
        }
        await tally.try("the node's server user held exactly protocol.md's permissions", () =>
          permissionProblems(mesh, node.name),
        );
        await tally.try("after SIGTERM: exit 0", () => node.stop());
        await tally.try(
          "no report lost; nothing applied twice to another outcome; every `on` action ran",
          async () => {
            // what the last run sent is in the stream; the double reads it a moment later
            await until(() => node.lostReports().length === 0);
            return accounting(life);
          },
        );
      } finally {
        await node.kill();
      }
    });
    // a cluster's failover takes from seconds to minutes (the hold's backoff grows while JetStream elects):
    // the long form only, to keep `npm test` short
    if (opts.long)
      for (let n = 0; n < 2; n++) {
        await tally.try(
          `round ${n}: the stream leader of a three-node JetStream cluster killed, then the node's server`,
          () => clusterLeaderKilled(tally.notes),
        );
        opts.progress?.(`bus-faults cluster ${n + 1}/2`);
      }
    else tally.notes.push("the three-node cluster runs in the long form only");
    return tally.outcome();
  },
};
