// The mesh double: a real nats-server with the mesh's accounts (src/mesh: operator, SYS, MESH, NODES as JWTs) and
// streams, and the controller's half of the protocol — answering enrolments with a user JWT for the node's
// identity key, signing declarations, reading reports and heartbeats, revoking. Test code.
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  AckPolicy,
  type ConsumerInfo,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
} from "@nats-io/jetstream";
import {
  type Authenticator,
  connect,
  type NatsConnection,
  nanos,
  type Subscription,
} from "@nats-io/transport-node";
import { type DialAuth, type Dialled, dial } from "../../src/link/dial.ts";
import {
  type Bus,
  consumeLoop,
  enrolUserJwt,
  ensureStreams,
  membershipOf,
  nodesAccountFor,
  nodeUserJwt,
  publishDeclaration,
  type Reads,
  type ReleaseInput,
  type Revoke,
  refusedAnswer,
  reply,
  revokeUsers,
  sealedAnswer,
  serviceAuthenticator,
  storeRelease,
  userOfIdentity,
} from "../../src/mesh/index.ts";
import {
  decodeCode,
  EnrolQuestion,
  type Envelope,
  encodeCode,
  type Heartbeat,
  keyPairOfSeed,
  type Membership,
  makeMeshKey,
  type NodeMessageKind,
  nkeyOf,
  nodeInboxPrefix,
  publicKeyFromRaw,
  type ReleaseManifest,
  type Report,
  rawKeyFromB64,
  rawPublicOf,
  STREAM_SUBJECTS,
  seedOf,
  signEnvelope,
  verifyNodeMessage,
} from "../../src/vocabulary/index.ts";
import { EVENT_WAIT_MS } from "../support/events.ts";
import { type MadeCert, makeCert } from "./cert.ts";
import { freePort, NatsServer, type Permissions, permissionsFor } from "./server.ts";

/** The mesh's streams and the subjects each keeps: src/mesh says them. */
export const STREAMS = STREAM_SUBJECTS;

export { EVENT_WAIT_MS };

const enc = new TextEncoder();
const dec = new TextDecoder();

/** What the double's ENROL consumer saw: the transport's reply field is kept so a test can look at it. */
export interface SeenEnrolment {
  subject: string;
  /** The JetStream message's own reply field: the consumer's ack address, not the node's inbox. */
  transportReply: string;
  question: EnrolQuestion | null;
  answered: "membership" | "refused" | "ignored" | "malformed";
}

/** A message the double read from a stream or a subject: its bytes, and its parsed value if it parsed. */
export interface Received<T> {
  subject: string;
  /** Stream sequence for a report; 0 for a heartbeat (core). */
  seq: number;
  data: Uint8Array;
  value: T | null;
  problem: string | null;
}

export type EnrolPolicy =
  | { answer: "membership" }
  /** The membership in clear, as the protocol never allows: for a test that the node refuses it. */
  | { answer: "clear" }
  | { answer: "refuse"; reason: string }
  | { answer: "ignore" };

export class MeshDouble {
  readonly enrolments: SeenEnrolment[] = [];
  readonly reports: Received<Report>[] = [];
  readonly heartbeats: Received<Heartbeat>[] = [];
  readonly meshKey = makeMeshKey();
  /**
   * Node name → its identity key (the public half always; the private half when the double made it, for a test
   * that dials as the node without enrolling it): its user's nkey is that key.
   */
  readonly identities = new Map<string, { publicKey: KeyObject; privateKey?: KeyObject }>();
  /** Node name → its user JWT, once it has one. */
  readonly userJwts = new Map<string, string>();
  /**
   * How a node the double admits reads when nothing says otherwise (an enrolment through the CLI): from a consumer
   * by default; a test of the run loop or the chaos scenarios sets "direct", as the controller now enrols.
   */
  defaultReads: Reads = "consumer";
  /** How each node the double admitted reads its declarations. */
  private readonly reads = new Map<string, Reads>();
  private readonly policies = new Map<string, EnrolPolicy>();
  /** The last serial signed for each node: the mesh raises it for every declaration. */
  private readonly serials = new Map<string, number>();
  private readonly loops: Promise<void>[] = [];
  private heartbeatSub: Subscription | null = null;
  private stopped = false;

  private constructor(
    readonly dir: string,
    readonly cert: MadeCert,
    readonly server: NatsServer,
    readonly nc: NatsConnection,
    readonly js: JetStreamClient,
    readonly jsm: JetStreamManager,
  ) {}

  /** Start a server on free loopback ports in a fresh temp directory, create the streams, start listening. */
  static async start(): Promise<MeshDouble> {
    const dir = mkdtempSync(join(tmpdir(), "mesh-double-"));
    const cert = makeCert(dir);
    const storeDir = join(dir, "jetstream");
    mkdirSync(storeDir);
    const server = new NatsServer({
      dir,
      port: await freePort(),
      httpPort: await freePort(),
      certFile: cert.certFile,
      keyFile: cert.keyFile,
      storeDir,
    });
    await server.start();
    const nc = await connect({
      servers: server.url,
      authenticator: serviceAuthenticator(server.accounts, "mesh", "mesh-double"),
      name: "mesh-double",
      tls: { ca: cert.certPem },
      reconnect: true,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 50,
    });
    const jsm = await jetstreamManager(nc);
    const double = new MeshDouble(dir, cert, server, nc, jetstream(nc), jsm);
    await double.createStreams();
    double.listen();
    return double;
  }

  get url(): string {
    return this.server.url;
  }

  /** SHA-256 of the server's DER certificate, lower-case hex, no colons. */
  get fingerprint(): string {
    return this.cert.fingerprint;
  }

  get monitorUrl(): string {
    return `http://127.0.0.1:${this.server.files.httpPort}`;
  }

  /** How the next enrolment of `node` is answered: a membership (the default), a refusal, or silence. */
  setEnrolPolicy(node: string, policy: EnrolPolicy): void {
    this.policies.set(node, policy);
  }

  /** A user of MESH minted for one connection: for a test that acts as the controller on its own connection. */
  meshAuthenticator(name = "mesh-test"): Authenticator {
    return serviceAuthenticator(this.server.accounts, "mesh", name);
  }

  /**
   * A fresh enrolling user for `node` (a key made now, its JWT expiring in `expiresS`) and the code that carries
   * it; `token` is the code's secret (the key's seed), for a test that looks for it where it must not be.
   */
  async enrolmentCode(
    node: string,
    opts: { expiresS?: number } = {},
  ): Promise<{ code: string; token: string }> {
    const pair = generateKeyPairSync("ed25519");
    const user = nkeyOf("user", pair.publicKey);
    const exp = Math.floor(Date.now() / 1000) + (opts.expiresS ?? 24 * 3600);
    const jwt = enrolUserJwt(this.server.accounts, node, user, exp);
    this.record(`enrol.${node}`, user, permissionsFor("enrol", node));
    const seed = seedOf("user", pair.privateKey);
    const code = encodeCode({
      node,
      servers: [this.url],
      fingerprint: this.fingerprint,
      transport: "nats",
      jwt,
      seed,
    });
    return { code, token: seed };
  }

  /** How a test dials as `node` (admitted by the double): its user JWT and the identity key it made. */
  nodeAuth(node: string): DialAuth {
    const jwt = this.userJwts.get(node);
    if (!jwt) throw new Error(`mesh double: node ${node} has no user yet`);
    return { kind: "jwt", user: `node.${node}`, jwt, key: this.identityKey(node) };
  }

  /** A pinned connection as `node` (admitted by the double), under exactly its grants: an attacker's view of it. */
  dialAs(node: string): Promise<Dialled> {
    return dial({
      servers: [this.url],
      fingerprint: this.fingerprint,
      auth: this.nodeAuth(node),
      inboxPrefix: nodeInboxPrefix(node),
    });
  }

  /** How a test dials as the enrolling user a code of the double's carries (`token`: the code's seed). */
  enrolAuth(node: string, code: string): DialAuth {
    const decoded = decodeCode(code);
    if (!decoded.ok || !("jwt" in decoded.value)) throw new Error("mesh double: not a v2 code");
    const pair = keyPairOfSeed("user", decoded.value.seed)!;
    return { kind: "jwt", user: `enrol.${node}`, jwt: decoded.value.jwt, key: pair.privateKey };
  }

  /** `node`'s identity public key as standard base64 of its raw 32 bytes: what declarations are addressed to. */
  identityB64(node: string): string | undefined {
    const known = this.identities.get(node);
    return known ? rawPublicOf(known.publicKey).toString("base64") : undefined;
  }

  /** The identity private key the double made for `node` (admitted without enrolling): what the node dials with. */
  identityKey(node: string): KeyObject {
    const key = this.identities.get(node)?.privateKey;
    if (!key) throw new Error(`mesh double: node ${node} has no identity key of the double's making`);
    return key;
  }

  /** Revoke `node`'s user on the server now, as `mesh node rm` does: its live connection is cut. */
  async revokeNode(node: string): Promise<void> {
    const identity = this.identities.get(node);
    if (!identity) throw new Error(`mesh double: node ${node} has no user`);
    await this.revoke({
      user: nkeyOf("user", identity.publicKey),
      at: Math.floor(Date.now() / 1000),
      enrolling: false,
      // the account its JWT was issued in (nodeUserJwt): its shard when it reads directly, else NODES
      account: nodesAccountFor(node, this.reads.get(node) ?? this.defaultReads),
    });
  }

  /** Revoke a code's enrolling user, as the controller does once the code is spent. */
  async revokeCode(code: string): Promise<void> {
    const decoded = decodeCode(code);
    if (!decoded.ok || !("jwt" in decoded.value)) throw new Error("mesh double: not a v2 code");
    const claims = JSON.parse(Buffer.from(decoded.value.jwt.split(".")[1] ?? "", "base64url").toString()) as {
      sub: string;
      iat: number;
    };
    // a user of ENROL, revoked at its JWT's second, as the controller does
    await this.revoke({ user: claims.sub, at: claims.iat, enrolling: true, account: "ENROL" });
  }

  private async revoke(revoke: Revoke): Promise<void> {
    const sys = await connect({
      servers: this.url,
      authenticator: serviceAuthenticator(this.server.accounts, "system", "mesh-double-sys"),
      tls: { ca: this.cert.certPem },
    });
    try {
      await revokeUsers(sys, this.server.accounts, [revoke]);
    } finally {
      await sys.close();
    }
  }

  /**
   * What enrolment gives a node, without the conversation: its user (exactly the fixture's permissions),
   * its durable pull consumer on DECLARE, and the membership that names them.
   */
  async admit(
    node: string,
    opts: { ackWaitMs?: number; identity?: string; reads?: Reads } = {},
  ): Promise<Membership> {
    // the double's nodes read from a consumer unless a test says otherwise: the link's consumer path is what most
    // of these tests are about, and a mesh's nodes enrolled before direct reads still take it
    const reads = opts.reads ?? this.reads.get(node) ?? this.defaultReads;
    const changed = this.reads.get(node) !== reads;
    this.reads.set(node, reads);
    if (opts.identity) {
      const raw = rawKeyFromB64(opts.identity);
      if (!raw) throw new Error(`mesh double: ${node}'s identity key is not base64 of 32 bytes`);
      const known = this.identities.get(node);
      if (!known || !rawPublicOf(known.publicKey).equals(raw))
        this.identities.set(node, { publicKey: publicKeyFromRaw("ed25519", raw) });
    } else if (!this.identities.has(node)) this.identities.set(node, generateKeyPairSync("ed25519"));
    if (!this.userJwts.has(node) || opts.identity || changed) {
      const identity = this.identities.get(node)!;
      const user = userOfIdentity(rawPublicOf(identity.publicKey).toString("base64"))!;
      this.userJwts.set(node, nodeUserJwt(this.server.accounts, node, user, undefined, reads));
      this.record(`node.${node}`, user, permissionsFor("node", node, reads));
    }
    if (reads === "direct") return this.membershipOf(node);
    await this.jsm.consumers.add("DECLARE", {
      durable_name: `node-${node}`,
      filter_subject: `mesh.declare.${node}`,
      ack_policy: AckPolicy.Explicit,
      ...(opts.ackWaitMs ? { ack_wait: nanos(opts.ackWaitMs) } : {}),
    });
    return this.membershipOf(node);
  }

  membershipOf(node: string): Membership {
    const jwt = this.userJwts.get(node);
    if (!jwt) throw new Error(`node ${node} has no user yet`);
    return membershipOf(node, {
      reads: this.reads.get(node) ?? this.defaultReads,
      servers: [this.url],
      fingerprint: this.fingerprint,
      meshKey: this.meshKey.publicB64,
      jwt,
    });
  }

  /** Sign `body` (a declaration, or its exact text) with the mesh key and publish it; the stream seq. */
  async declare(node: string, body: object | string): Promise<number> {
    return await this.publishEnvelope(node, this.sign(node, body));
  }

  /**
   * The envelope the mesh would send: a declaration given as an object carries the next serial for `node`, the
   * time (protocol.md, "The signed order") and `to`, the node's identity key when the double knows it, unless it
   * names its own; exact text is signed as it stands.
   */
  sign(node: string, body: object | string): Envelope {
    const text = typeof body === "string" ? body : JSON.stringify(this.ordered(node, body));
    return signEnvelope(text, this.meshKey.privateKey);
  }

  private ordered(node: string, body: object): object {
    const given = body as { serial?: unknown; issued_at?: unknown; to?: unknown };
    const serial = typeof given.serial === "number" ? given.serial : (this.serials.get(node) ?? 0) + 1;
    this.serials.set(node, Math.max(serial, this.serials.get(node) ?? 0));
    const to = given.to ?? this.identityB64(node);
    return { ...body, ...(to ? { to } : {}), serial, issued_at: given.issued_at ?? new Date().toISOString() };
  }

  /** Publish anything on `mesh.declare.<node>` — a forged envelope, raw bytes — and its wake-up, as a push does; the stream seq. */
  async publishEnvelope(node: string, envelope: object | Uint8Array): Promise<number> {
    const data = envelope instanceof Uint8Array ? envelope : enc.encode(JSON.stringify(envelope));
    return (await publishDeclaration({ js: this.js, nc: this.nc }, node, data)).seq;
  }

  /** The `n`th report (1-based) received, of `node` only when given; waits for it. */
  async awaitReport(n: number, opts: { node?: string; timeoutMs?: number } = {}): Promise<Received<Report>> {
    const mine = () => this.reports.filter((r) => !opts.node || r.subject === `mesh.report.${opts.node}`);
    await waitFor(() => mine().length >= n, opts.timeoutMs ?? EVENT_WAIT_MS, `report ${n}`);
    return mine()[n - 1]!;
  }

  async awaitHeartbeat(n: number, opts: { timeoutMs?: number } = {}): Promise<Received<Heartbeat>> {
    await waitFor(() => this.heartbeats.length >= n, opts.timeoutMs ?? EVENT_WAIT_MS, `heartbeat ${n}`);
    return this.heartbeats[n - 1]!;
  }

  async awaitEnrolment(n: number, opts: { timeoutMs?: number } = {}): Promise<SeenEnrolment> {
    await waitFor(() => this.enrolments.length >= n, opts.timeoutMs ?? EVENT_WAIT_MS, `enrolment ${n}`);
    return this.enrolments[n - 1]!;
  }

  async consumerInfo(node: string): Promise<ConsumerInfo> {
    return await this.jsm.consumers.info("DECLARE", `node-${node}`);
  }

  /**
   * Wait until the server holds nothing of `node`'s unsettled: no declaration waiting and none delivered and
   * awaiting its ack. A node acks only once its apply is over and its report is in its outbox.
   */
  async awaitSettled(node: string, opts: { timeoutMs?: number } = {}): Promise<void> {
    const ms = opts.timeoutMs ?? EVENT_WAIT_MS;
    let last = "no answer";
    const settled = async () => {
      // a node reading directly settles on its own disk: the report of the last declaration is what the mesh sees
      if (this.reads.get(node) === "direct") return await this.reportedLast(node);
      try {
        const info = await this.consumerInfo(node);
        last = `${info.num_pending} waiting, ${info.num_ack_pending} unacked`;
        return info.num_pending === 0 && info.num_ack_pending === 0;
      } catch (e) {
        last = (e as Error).message;
        return false;
      }
    };
    try {
      await waitForAsync(settled, ms, "settling");
    } catch {
      throw new Error(`mesh double: ${node}'s declarations were not all settled within ${ms} ms (${last})`);
    }
  }

  /** Whether a report of `node` names the last declaration on its subject (or none is there). */
  private async reportedLast(node: string): Promise<boolean> {
    const { lastSeq } = await this.declared(node);
    const subject = `mesh.report.${node}`;
    return (
      lastSeq === null ||
      this.reports.some((r) => r.subject === subject && (r.value?.declaration.seq ?? 0) >= lastSeq)
    );
  }

  /** How many reports of `node` the REPORTS stream holds: every one the node sent, read or not. */
  async reportCount(node: string): Promise<number> {
    const subject = `mesh.report.${node}`;
    const info = await this.jsm.streams.info("REPORTS", { subjects_filter: subject });
    return info.state.subjects?.[subject] ?? 0;
  }

  async deleteConsumer(node: string): Promise<void> {
    await this.jsm.consumers.delete("DECLARE", `node-${node}`);
  }

  /** How many messages DECLARE holds for `node`, and the sequence of the last. */
  async declared(node: string): Promise<{ messages: number; lastSeq: number | null }> {
    const info = await this.jsm.streams.info("DECLARE", { subjects_filter: `mesh.declare.${node}` });
    const messages = info.state.subjects?.[`mesh.declare.${node}`] ?? 0;
    if (messages === 0) return { messages, lastSeq: null };
    const last = await this.jsm.streams.getMessage("DECLARE", { last_by_subj: `mesh.declare.${node}` });
    return { messages, lastSeq: last?.seq ?? null };
  }

  /** Note a user issued (the server needs no list: this is the test's record of what each JWT grants). */
  private record(name: string, nkey: string, permissions: Permissions): void {
    this.server.users = [
      ...this.server.users.filter((u) => u.user !== name),
      { user: name, nkey, permissions },
    ];
  }

  /** Stop the server (same port and store kept), for a node to find the bus away. */
  async stopServer(): Promise<void> {
    await this.server.stop();
  }

  /** Start it again; resolves once the double's own connection is back and JetStream answers. */
  async startServer(): Promise<void> {
    await this.server.start();
    await this.ready();
  }

  /** The server stopped in its tracks (SIGSTOP), its connections open, answering nothing until `resumeServer`. */
  pauseServer(): void {
    this.server.pause();
  }

  resumeServer(): void {
    this.server.resume();
  }

  async restartServer(): Promise<void> {
    await this.server.restart();
    await this.ready();
  }

  private async ready(): Promise<void> {
    await waitForAsync(
      async () => {
        try {
          await this.nc.flush();
          await this.jsm.streams.info("DECLARE");
          return true;
        } catch {
          return false;
        }
      },
      EVENT_WAIT_MS,
      "JetStream after the server started",
    );
  }

  /** Close everything the double started and remove its directory. */
  /** A release of mesh-host stored on the double's bus, its manifest signed by the double's mesh key. */
  storeRelease(input: ReleaseInput): Promise<ReleaseManifest> {
    return storeRelease(this.bus, this.meshKey.privateKey, 1, input);
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.heartbeatSub?.unsubscribe();
    await this.nc.close().catch(() => undefined);
    await Promise.allSettled(this.loops);
    await this.server.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  // the mesh's own streams and durables (src/mesh): the double is the controller `mesh up` is, on one server
  private async createStreams(): Promise<void> {
    await ensureStreams(this.bus, 1);
  }

  /** The double's connection as src/mesh's controller holds one. */
  private get bus(): Bus {
    return { nc: this.nc, js: this.js, jsm: this.jsm, close: async () => {} };
  }

  private listen(): void {
    this.loops.push(this.consumeLoop("ENROL", "mesh-enrol", (m) => this.answer(m)));
    this.loops.push(
      this.consumeLoop("REPORTS", "mesh-reports", async (m) => {
        this.reports.push(this.received(m.subject, m.seq, m.data, "report"));
        m.ack();
      }),
    );
    this.heartbeatSub = this.nc.subscribe("mesh.heartbeat.>", {
      callback: (err, m) => {
        if (!err) this.heartbeats.push(this.received(m.subject, 0, m.data, "heartbeat"));
      },
    });
  }

  /** src/mesh's reader of a stream through a durable, taken up again after a restart, until the double stops. */
  private consumeLoop(stream: string, durable: string, handle: (m: JsMsg) => Promise<void>): Promise<void> {
    return consumeLoop(
      this.bus,
      stream,
      durable,
      handle,
      () => this.stopped,
      (line) => console.error(`mesh double: ${line}`),
    );
  }

  /** A node's message as the mesh reads it: its value only when signed by the node's identity key. */
  private received<K extends "report" | "heartbeat">(
    subject: string,
    seq: number,
    data: Uint8Array,
    kind: K,
  ): Received<K extends "report" ? Report : Heartbeat> {
    const node = subject.split(".")[2] ?? "";
    const identity = this.identityB64(node);
    const verified = identity
      ? verifyNodeMessage(Uint8Array.from(data), kind as NodeMessageKind, node, identity)
      : { ok: false as const, reason: `the double knows no identity key of node ${node}` };
    return {
      subject,
      seq,
      data: Uint8Array.from(data),
      value: verified.ok ? (verified.value as K extends "report" ? Report : Heartbeat) : null,
      problem: verified.ok ? null : verified.reason,
    };
  }

  private async answer(m: JsMsg): Promise<void> {
    const transportReply = (m as unknown as { reply: string }).reply;
    const parsed = EnrolQuestion.safeParse(safeJson(m.data));
    if (!parsed.success) {
      this.enrolments.push({ subject: m.subject, transportReply, question: null, answered: "malformed" });
      m.ack();
      return;
    }
    const question = parsed.data;
    const raw = rawKeyFromB64(question.keys.identity);
    if (m.subject === `mesh.enrol.${question.node}` && raw)
      this.identities.set(question.node, { publicKey: publicKeyFromRaw("ed25519", raw) });
    const policy = this.policies.get(question.node) ?? { answer: "membership" };
    if (m.subject !== `mesh.enrol.${question.node}`) {
      await reply(
        this.nc,
        question.node,
        question.reply,
        refusedAnswer(`asked on ${m.subject} for node ${question.node}`),
      );
      this.enrolments.push({ subject: m.subject, transportReply, question, answered: "refused" });
    } else if (policy.answer === "ignore") {
      this.enrolments.push({ subject: m.subject, transportReply, question, answered: "ignored" });
    } else if (policy.answer === "refuse") {
      await reply(this.nc, question.node, question.reply, refusedAnswer(policy.reason));
      this.enrolments.push({ subject: m.subject, transportReply, question, answered: "refused" });
    } else {
      const membership = await this.admit(question.node, { identity: question.keys.identity });
      // src/mesh's answer, sealed to the key the question carried; "clear" is the test's own forgery
      await reply(
        this.nc,
        question.node,
        question.reply,
        policy.answer === "clear" ? { v: 1, ok: true, membership } : sealedAnswer(question, membership),
      );
      this.enrolments.push({ subject: m.subject, transportReply, question, answered: "membership" });
    }
    m.ack();
  }
}

function safeJson(data: Uint8Array): unknown {
  try {
    return JSON.parse(dec.decode(data));
  } catch {
    return undefined;
  }
}

export async function waitFor(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`mesh double: no ${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export async function waitForAsync(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`mesh double: no ${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
