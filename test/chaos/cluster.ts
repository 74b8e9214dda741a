// Scenario 3's last fault: a three-node JetStream cluster on loopback, its streams with three replicas, and the
// node's membership naming all three servers. The DECLARE stream's leader is SIGKILLed, then the server the node
// is connected to: each time the node dials again and reads its last declaration directly (it has no consumer, and
// any replica answers a direct get), and the next declaration is applied and reported. The cluster runs the mesh's
// own accounts (src/mesh: operator, SYS, MESH, NODES as JWTs, the `full` resolver): the test signs
// in as a user of MESH, the node with its identity key and the user JWT NODES issued for it. No password.
import type { ChildProcess } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import {
  authLines,
  makeAccountKeys,
  membershipOf,
  nodeUserJwt,
  publishDeclaration,
  serviceAuthenticator,
  userOfIdentity,
} from "../../src/mesh/index.ts";
import { ensureKeys, publicKeys, State } from "../../src/store/index.ts";
import { makeMeshKey, type Report, signEnvelope, verifyNodeMessage } from "../../src/vocabulary/index.ts";
import { freePort, makeCert, NATS_SERVER } from "../mesh/index.ts";
import { groupAlive, killGroup, spawnGroup } from "../support/processes.ts";
import { describeExit, meshHost, removeTemp, sleep, tempDir } from "./support.ts";

const NODE = "clustered";
/** How long a node may take to bind again and apply: the hold's capped backoff grows while JetStream elects. */
const WAIT_MS = 150_000;
/** Once applied, its report: the link is up, so it should not wait for the next declaration (a failure bound). */
const REPORT_WAIT_MS = 120_000;
/** A member's start, up to its "Server is ready": a failure bound for a busy machine. */
const START_WAIT_MS = 60_000;

interface Member {
  name: string;
  port: number;
  clusterPort: number;
  httpPort: number;
  conf: string;
  child: ChildProcess | null;
  log: string;
}

class Cluster {
  readonly members: Member[] = [];
  readonly accounts = makeAccountKeys();
  readonly cert;

  constructor(readonly dir: string) {
    this.cert = makeCert(dir, "server", "mesh-cluster");
  }

  async configure(): Promise<void> {
    for (let i = 0; i < 3; i++)
      this.members.push({
        name: `c${i}`,
        port: await freePort(),
        clusterPort: await freePort(),
        httpPort: await freePort(),
        conf: join(this.dir, `c${i}.conf`),
        child: null,
        log: "",
      });
    for (const m of this.members) {
      const store = join(this.dir, `js-${m.name}`);
      const resolver = join(this.dir, `jwt-${m.name}`);
      mkdirSync(store, { recursive: true });
      mkdirSync(resolver, { recursive: true });
      const routes = this.members
        .filter((o) => o !== m)
        .map((o) => `"nats-route://127.0.0.1:${o.clusterPort}"`)
        .join(", ");
      writeFileSync(
        m.conf,
        [
          `listen: "127.0.0.1:${m.port}"`,
          `http: "127.0.0.1:${m.httpPort}"`,
          `server_name: "${m.name}"`,
          `tls { cert_file: "${this.cert.certFile}", key_file: "${this.cert.keyFile}", timeout: 2 }`,
          `jetstream { store_dir: "${store}", max_memory_store: 64MB, max_file_store: 1GB }`,
          `cluster { name: "chaos", listen: "127.0.0.1:${m.clusterPort}", routes: [${routes}] }`,
          ...authLines(this.accounts, resolver),
          "",
        ].join("\n"),
      );
    }
  }

  get urls(): string[] {
    return this.members.map((m) => `nats://127.0.0.1:${m.port}`);
  }

  async start(m: Member): Promise<void> {
    const child = spawnGroup(NATS_SERVER, ["-c", m.conf], { stdio: ["ignore", "ignore", "pipe"] });
    m.child = child;
    const from = m.log.length;
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (c: string) => (m.log += c));
    child.once("exit", () => {
      if (m.child === child) m.child = null;
    });
    const deadline = Date.now() + START_WAIT_MS;
    while (!m.log.slice(from).includes("Server is ready")) {
      if (!m.child || Date.now() > deadline) throw new Error(`${m.name} did not start: ${m.log.slice(-500)}`);
      await sleep(20);
    }
  }

  kill(m: Member): void {
    if (m.child?.pid) killGroup(m.child.pid);
    m.child = null;
  }

  byName(name: string | undefined): Member | undefined {
    return this.members.find((m) => m.name === name);
  }

  /** The member the node's user (`user`, its nkey) is connected to, from each server's own /connz. */
  async nodeServer(user: string): Promise<Member | undefined> {
    for (const m of this.members) {
      if (!m.child) continue;
      try {
        const connz = (await (await fetch(`http://127.0.0.1:${m.httpPort}/connz?auth=true`)).json()) as {
          connections?: { authorized_user?: string; name_tag?: string }[];
        };
        // a JWT user is listed by its nkey (and its JWT's name as the tag)
        if (connz.connections?.some((c) => c.authorized_user === user || c.name_tag === `node.${NODE}`))
          return m;
      } catch {
        // this one is not answering
      }
    }
    return undefined;
  }

  /** Every member killed; resolves once none is left, so their store can be removed. */
  async stopAll(): Promise<void> {
    const pids = this.members.flatMap((m) => (m.child?.pid ? [m.child.pid] : []));
    for (const m of this.members) this.kill(m);
    while (pids.some(groupAlive)) await sleep(20);
  }
}

/** Retry `fn` until it resolves: JetStream answers only once the cluster has leaders again. */
async function retry<T>(fn: () => Promise<T>, what: string, ms = WAIT_MS): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      return await fn();
    } catch (e) {
      last = e;
      await sleep(250);
    }
  }
  throw new Error(`${what}: ${(last as Error)?.message}`);
}

/** Reports read straight from the REPORTS stream by sequence, so a leader change loses none of them; each the
 *  node's only when signed by its identity key (`identity`, standard base64), as the controller reads them. */
async function reportsIn(jsm: JetStreamManager, identity: string): Promise<Report[]> {
  const info = await jsm.streams.info("REPORTS");
  const out: Report[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const m = await jsm.streams.getMessage("REPORTS", { seq });
    const heard = m ? verifyNodeMessage(m.data, "report", NODE, identity) : null;
    if (heard?.ok) out.push(heard.value);
  }
  return out;
}

export async function clusterLeaderKilled(notes: string[] = []): Promise<string[]> {
  const dir = tempDir("mesh-chaos-cluster-");
  const cluster = new Cluster(dir);
  const problems: string[] = [];
  const timings: string[] = [];
  let nc: NatsConnection | null = null;
  let host: Awaited<ReturnType<typeof meshHost>> | null = null;
  try {
    await cluster.configure();
    await Promise.all(cluster.members.map((m) => cluster.start(m)));
    nc = await connect({
      servers: cluster.urls,
      authenticator: serviceAuthenticator(cluster.accounts, "mesh", "chaos-cluster"),
      tls: { ca: cluster.cert.certPem },
      reconnect: true,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 100,
    });
    const conn = nc;
    const jsm = await retry(() => jetstreamManager(conn), "JetStream in the cluster");
    const js = jetstream(nc);
    await retry(
      () =>
        jsm.streams.add({
          name: "DECLARE",
          subjects: ["mesh.declare.>"],
          max_msgs_per_subject: 1,
          num_replicas: 3,
          // any replica answers the node's direct get, a lagging one too (the node asks again until it catches up)
          allow_direct: true,
        }),
      "DECLARE with three replicas",
    );
    await retry(
      () => jsm.streams.add({ name: "REPORTS", subjects: ["mesh.report.>"], num_replicas: 3 }),
      "REPORTS",
    );
    // the node as enrolment leaves it: keys, the membership naming all three servers, its name
    const root = join(dir, "root");
    const stateDir = join(dir, "state");
    mkdirSync(root);
    const keys = ensureKeys(stateDir);
    if (!keys.ok) throw new Error(keys.reason);
    const meshKey = makeMeshKey();
    const identity = publicKeys(keys.keys).identity;
    const user = userOfIdentity(identity)!;
    const state = new State(stateDir);
    state.writeMembership(
      membershipOf(NODE, {
        servers: cluster.urls,
        fingerprint: cluster.cert.fingerprint,
        meshKey: meshKey.publicB64,
        jwt: nodeUserJwt(cluster.accounts, NODE, user),
      }),
    );
    state.writeNode({ node: NODE, mode: null });
    host = await meshHost(
      [
        "run",
        "--state",
        stateDir,
        "--root",
        root,
        "--host",
        "linux",
        "--heartbeat-s",
        "1",
        "--redial-spread-s",
        "1",
        "--drift-s",
        "3600",
      ],
      { timeoutMs: 10 * 60_000, env: { MESH_LOG: "info" } },
    );
    let serial = 0;
    const declare = async (tag: string): Promise<number> => {
      serial++;
      const body = JSON.stringify({
        v: 1,
        node: NODE,
        to: identity,
        serial,
        issued_at: new Date().toISOString(),
        mode: "converged",
        resources: [
          { id: "conf", type: "file", path: "/etc/cluster.conf", content: `${tag}\n`, mode: "0644" },
        ],
      });
      const data = new TextEncoder().encode(JSON.stringify(signEnvelope(body, meshKey.privateKey)));
      // stored, then woken, as a push does
      const ack = await retry(() => publishDeclaration({ js, nc: conn }, NODE, data), `publishing ${tag}`);
      return ack.seq;
    };
    const outbox = join(stateDir, "outbox");
    const fileSays = () => {
      try {
        return readFileSync(join(root, "etc/cluster.conf"), "utf8");
      } catch {
        return null;
      }
    };
    // applied (the file says so), then reported: each within its own bound, each latency noted
    const applied = async (seq: number, tag: string): Promise<string[]> => {
      const t0 = Date.now();
      while (fileSays() !== `${tag}\n`) {
        if (Date.now() - t0 > WAIT_MS) return [`${tag} (seq ${seq}) not applied within ${WAIT_MS} ms`];
        await sleep(50);
      }
      const t1 = Date.now();
      timings.push(`${tag} applied after ${t1 - t0} ms`);
      while (Date.now() - t1 < REPORT_WAIT_MS) {
        const reports = await reportsIn(jsm, identity).catch(() => [] as Report[]);
        if (reports.some((r) => r.declaration.seq === seq && r.outcome === "applied")) {
          timings.push(`reported ${Date.now() - t1} ms later`);
          return [];
        }
        await sleep(200);
      }
      const waiting = readdirSync(outbox).filter((n) => n.endsWith(".json")).length;
      return [
        `${tag} applied, but its report did not reach REPORTS within ${REPORT_WAIT_MS} ms with the link up (${waiting} waiting in the outbox: nothing flushes it before the next declaration or drift tick)`,
      ];
    };
    problems.push(...(await applied(await declare("one"), "one")));
    // the DECLARE stream's leader, killed
    const leader = cluster.byName(
      (await retry(() => jsm.streams.info("DECLARE"), "stream info")).cluster?.leader,
    );
    if (!leader) return [...problems, "the DECLARE stream has no leader to kill"];
    cluster.kill(leader);
    problems.push(
      ...(await applied(await declare("two"), "two")).map(
        (p) => `after the stream leader ${leader.name} was killed: ${p}`,
      ),
    );
    // back, then the server the node is on, killed: it must dial another and bind again
    await cluster.start(leader);
    const on = await cluster.nodeServer(user);
    if (on) {
      cluster.kill(on);
      problems.push(
        ...(await applied(await declare("three"), "three")).map(
          (p) => `after the node's own server ${on.name} was killed: ${p}`,
        ),
      );
    } else problems.push("could not tell which server the node is connected to");
    // nothing applied twice to another outcome: a seq reported more than once changed nothing the second time
    const reports = await retry(() => reportsIn(jsm, identity), "reading the reports");
    const seen = new Set<number>();
    for (const r of reports) {
      if (seen.has(r.declaration.seq) && r.steps.some((s) => s.did !== "unchanged"))
        problems.push(`seq ${r.declaration.seq} applied again and changed the machine`);
      seen.add(r.declaration.seq);
    }
    host.child.kill("SIGTERM");
    const exit = await host.exited;
    host = null;
    if (exit.code !== 0) problems.push(`run did not exit 0 on SIGTERM: ${describeExit(exit)}`);
    notes.push(`cluster: ${timings.join(", ")}`);
    if (process.env.CHAOS_DEBUG) process.stderr.write(`${exit.stderr}\n`);
    return problems;
  } finally {
    if (host) await host.kill();
    await nc?.close().catch(() => {});
    await cluster.stopAll();
    removeTemp(dir);
  }
}
