// What a node says of itself, signed (protocol.md, "Node messages"): reports, heartbeats and rekeys travel as
// `{v:2, body, sig}`, the body the message's JSON as a string and `sig` the node's Ed25519 identity key's
// signature over the body's UTF-8 bytes. Why: a subject says where a message was published, not who wrote it;
// whoever can publish there (a node with a crafted reply, a leaked credential) could otherwise speak as the
// node. The mesh verifies against the identity key the node enrolled with, and nothing else.
// Pure (no nats): the link signs with it, the mesh's one reader (src/mesh/heard.ts) verifies with it.
import { type KeyObject, sign, verify } from "node:crypto";
import * as z from "zod";
import { MAX_ENVELOPE_BYTES } from "../defaults.ts";
import { printable } from "../printable.ts";
import { ed25519PublicFromB64 } from "./envelope.ts";
import { parseJsonBytes } from "./json.ts";
import { PlanAnswer } from "./plan.ts";
import { Heartbeat, RekeyBody, Report } from "./wire.ts";

/** A node's message on the wire: v 2, so it is never mistaken for the mesh's declaration envelope (v 1). */
export const SignedMessage = z.lazy(() =>
  z.strictObject({
    v: z.literal(2),
    body: z.string(),
    sig: z.string().regex(/^[A-Za-z0-9+/]{86}==$/, "must be standard base64 of a 64-byte signature"),
  }),
);
export type SignedMessage = z.infer<typeof SignedMessage>;

/** What each kind of node message carries, by the subject it travels on (`mesh.<kind>.<n>`). */
export interface NodeSaid {
  report: Report;
  heartbeat: Heartbeat;
  rekey: RekeyBody;
  /** A plan's answer, on the request's reply address (the kind is the reader's to name: no subject carries it). */
  plan: PlanAnswer;
}
export type NodeMessageKind = keyof NodeSaid;

const SCHEMAS: { [K in NodeMessageKind]: () => z.ZodType<NodeSaid[K]> } = {
  report: () => Report,
  heartbeat: () => Heartbeat,
  rekey: () => RekeyBody,
  plan: () => PlanAnswer,
};

export type VerifiedMessage<K extends NodeMessageKind> =
  | { ok: true; value: NodeSaid[K]; body: string }
  | { ok: false; reason: string };

/** The node's side: the message as JSON, signed with its identity key. Ed25519 is deterministic: the same body
 *  signs to the same bytes, so a report sent again is the same message to the stream's de-duplication. */
export function signMessage(value: object, identity: KeyObject): SignedMessage {
  const body = JSON.stringify(value);
  return { v: 2, body, sig: sign(null, Buffer.from(body, "utf8"), identity).toString("base64") };
}

/**
 * The mesh's side, the one check every reader makes: well formed, signed by `identity` (the node's enrolled key,
 * standard base64), a `kind` by its schema, and about `node`. Why not, in one line, otherwise; the body is
 * parsed only once its signature holds.
 */
export function verifyNodeMessage<K extends NodeMessageKind>(
  bytes: Uint8Array,
  kind: K,
  node: string,
  identity: string,
): VerifiedMessage<K> {
  const json = parseJsonBytes(bytes, MAX_ENVELOPE_BYTES);
  if (!json.ok) return { ok: false, reason: `the message ${json.reason}` };
  const message = SignedMessage.safeParse(json.value);
  if (!message.success) return { ok: false, reason: `not a signed ${kind} ({v:2, body, sig})` };
  const key = ed25519PublicFromB64(identity);
  if (!key.ok) return { ok: false, reason: `the enrolled identity key ${key.reason}` };
  const body = Buffer.from(message.data.body, "utf8");
  // a lone surrogate becomes U+FFFD in UTF-8: two bodies would share one signature
  if (body.toString("utf8") !== message.data.body)
    return { ok: false, reason: "the body is not well-formed Unicode" };
  if (!holds(body, message.data.sig, key.key))
    return { ok: false, reason: `the signature does not verify against ${node}'s enrolled identity key` };
  const inner = parseJsonBytes(body, MAX_ENVELOPE_BYTES);
  const parsed = inner.ok ? SCHEMAS[kind]().safeParse(inner.value) : null;
  if (!parsed?.success) return { ok: false, reason: `the signed body is not a ${kind}` };
  const said = (parsed.data as { node: string }).node;
  if (said !== node)
    return { ok: false, reason: `the ${kind} is of node ${printable(said, 64)}, not ${node}` };
  return { ok: true, value: parsed.data, body: message.data.body };
}

function holds(body: Uint8Array, sigB64: string, key: KeyObject): boolean {
  try {
    return verify(null, body, key, Buffer.from(sigB64, "base64"));
  } catch {
    return false;
  }
}
