// The wire shapes of protocol.md, held to the fixtures under test/fixtures/.
// Each is built on its first use (`z.lazy`, see resources.ts): an offline apply never builds the link's.
import * as z from "zod";
import { Mode, Sealed } from "./declaration.ts";
import { NodeName } from "./resources.ts";

const B64Key = z.lazy(() =>
  z.string().regex(/^[A-Za-z0-9+/]{43}=$/, "must be standard base64 of 32 raw bytes"),
);
const Fingerprint = z.lazy(() =>
  z.string().regex(/^[0-9a-f]{64}$/, "must be a SHA-256 hex fingerprint, lower case, no colons"),
);
const ServerUrl = z.lazy(() =>
  z.string().regex(/^(nats|tls):\/\/[^\s/]+:[0-9]{1,5}$/, "must be nats://host:port"),
);
const Time = z.lazy(() => z.iso.datetime({ offset: false }));

/** A declaration as the mesh sends it: the body as a string and an Ed25519 signature over its UTF-8 bytes. */
export const Envelope = z.lazy(() =>
  z.strictObject({
    v: z.literal(1),
    body: z.string(),
    sig: z.string().regex(/^[A-Za-z0-9+/]{86}==$/, "must be standard base64 of a 64-byte signature"),
  }),
);
export type Envelope = z.infer<typeof Envelope>;

const MembershipParts = () => ({
  transport: z.string(),
  servers: z.array(ServerUrl).min(1),
  fingerprint: Fingerprint,
  user: z.string().regex(/^node\.[a-z0-9][a-z0-9_-]{0,62}$/, "must be node.<name>"),
  stream: z.string().min(1),
  // absent: the node reads its last declaration directly, woken by the wake-up of each (protocol.md "Direct
  // reads"); present (a node enrolled before): it pulls from this durable consumer the mesh made
  consumer: z.string().min(1).optional(),
  subject: z.string().min(1, "must not be empty"),
  mesh_key: B64Key,
});

/** What both forms of a membership share: where, which certificate, which user, which consumer, which mesh key. */
export const MembershipBus = z.lazy(() => z.strictObject(MembershipParts()));

/**
 * Where a declaration sat on the mesh's DECLARE stream when a node read it directly: its sequence and the server's
 * time (the direct get's Nats-Sequence and Nats-Time-Stamp). A node keeps the last it settled (store/settled.ts).
 */
export const StreamMark = z.lazy(() =>
  z.strictObject({ seq: z.number().int().min(1), time: z.string().min(1) }),
);
export type StreamMark = z.infer<typeof StreamMark>;

/** A user JWT as NATS spells one: three base64url parts. */
const UserJwt = z.lazy(() =>
  z.string().regex(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/, "must be a JWT"),
);

/**
 * v2: `jwt` is the node's user JWT, issued for its identity key; the node signs the server's nonce with that key
 * and holds no password. v1 (a mesh made before): `password`. Exactly one of the two, so one is never read as the
 * other.
 */
export const Membership = z.lazy(() =>
  z.union([
    z.strictObject({ ...MembershipParts(), jwt: UserJwt }),
    z.strictObject({ ...MembershipParts(), password: z.string().min(1) }),
  ]),
);
export type Membership = z.infer<typeof Membership>;

const CodeParts = () => ({
  node: NodeName,
  servers: z.array(ServerUrl).min(1),
  fingerprint: Fingerprint,
  transport: z.literal("nats"),
});

/**
 * v2: the enrolling user's JWT (its expiry is the code's) and the seed of its key — a secret. v1 (a mesh made
 * before): `token`, the enrolling user's password.
 */
export const EnrolmentCodeV2 = z.lazy(() =>
  z.strictObject({
    ...CodeParts(),
    jwt: UserJwt,
    seed: z.string().regex(/^SU[A-Z2-7]{56}$/, "must be a user nkey seed"),
  }),
);
export const EnrolmentCodeV1 = z.lazy(() => z.strictObject({ ...CodeParts(), token: z.string().min(1) }));
export const EnrolmentCode = z.lazy(() => z.union([EnrolmentCodeV2, EnrolmentCodeV1]));
export type EnrolmentCode = z.infer<typeof EnrolmentCode>;

export const Tunnel = z.lazy(() =>
  z.strictObject({
    interface: z.string(),
    port: z.number().int(),
    address: z.string(),
    range: z.string(),
    peers: z.number().int(),
    mtu: z.number().int(),
  }),
);

/** What a node says of itself (at enrolment, then on its heartbeats): what `--where` selects by beside labels. */
export const NodeFacts = z.lazy(() =>
  z.strictObject({
    os: z.string().max(64),
    arch: z.string().max(64),
    hostname: z.string().max(253),
    version: z.string().max(64),
    kind: z.string().max(64).optional(),
    kernel: z.string().max(128).optional(),
    cpus: z.string().max(8).optional(),
    memory_mb: z.string().max(16).optional(),
  }),
);
export type NodeFacts = z.infer<typeof NodeFacts>;

export const EnrolQuestion = z.lazy(() =>
  z.strictObject({
    v: z.literal(1),
    node: NodeName,
    reply: z.string(),
    keys: z.strictObject({ identity: B64Key, sealing: B64Key, overlay: B64Key }),
    facts: NodeFacts,
    tunnel: Tunnel.optional(),
  }),
);
export type EnrolQuestion = z.infer<typeof EnrolQuestion>;

/**
 * The mesh's answer. `membership` is the Membership's JSON sealed to the sealing key the question carried: the
 * answer is a core message on `_INBOX.enrol.<n>.>`, where whoever holds the token can listen too.
 */
export const EnrolAnswer = z.lazy(() =>
  z.discriminatedUnion("ok", [
    z.strictObject({ v: z.literal(1), ok: z.literal(true), membership: Sealed }),
    z.strictObject({ v: z.literal(1), ok: z.literal(false), reason: z.string() }),
  ]),
);
export type EnrolAnswer = z.infer<typeof EnrolAnswer>;

export const Did = z.lazy(() =>
  z.enum([
    "created",
    "updated",
    "repaired",
    "unchanged",
    "removed",
    "restored",
    "ran",
    "skipped",
    "failed",
    "not-reached",
  ]),
);
export type Did = z.infer<typeof Did>;

export const ReportStep = z.lazy(() =>
  z.strictObject({ id: z.string(), type: z.string(), did: Did, detail: z.string() }),
);
export type ReportStep = z.infer<typeof ReportStep>;

export const Outcome = z.lazy(() => z.enum(["applied", "failed", "refused", "superseded"]));
export type Outcome = z.infer<typeof Outcome>;

/** `original`: the held original's SHA-256, absent where a secret (or a private key) was written over it. */
export const OriginalPath = z.lazy(() =>
  z.strictObject({ id: z.string(), path: z.string(), original: z.string().optional() }),
);

export const Report = z.lazy(() =>
  z.strictObject({
    v: z.literal(1),
    node: z.string(),
    declaration: z.strictObject({ seq: z.number().int().min(0), digest: z.string() }),
    outcome: Outcome,
    started_at: Time,
    finished_at: Time,
    steps: z.array(ReportStep),
    holds: z.array(OriginalPath),
    refusals: z.array(z.strictObject({ id: z.string(), field: z.string(), reason: z.string() })),
    host: z.strictObject({ version: z.string(), os: z.string() }),
    mode: Mode.optional(),
    notes: z.array(z.string()).optional(),
  }),
);
export type Report = z.infer<typeof Report>;

/** A rekey (overlay.md): the overlay key the node left, the one it took from a found tunnel, and the tunnel. */
export const RekeyBody = z.lazy(() =>
  z.strictObject({
    v: z.literal(1),
    node: NodeName,
    /** The overlay public key the node enrolled with (or last told), now given up. */
    left: B64Key,
    /** The overlay public key taken from the tunnel: the one the tunnel's peers already know. */
    taken: B64Key,
    tunnel: Tunnel,
  }),
);
export type RekeyBody = z.infer<typeof RekeyBody>;

export const Heartbeat = z.lazy(() =>
  z.strictObject({
    v: z.literal(1),
    node: z.string(),
    at: Time,
    version: z.string(),
    uptime_s: z.number().int().min(0),
    last: z.strictObject({ seq: z.number().int(), outcome: z.string(), at: z.string() }).nullable(),
    confirmed: z.boolean(),
    /** Its facts as they are now: the mesh's record follows when they change (a kernel upgraded, memory added). */
    facts: NodeFacts.optional(),
  }),
);
export type Heartbeat = z.infer<typeof Heartbeat>;
