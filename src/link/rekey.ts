// The rekey (overlay.md, protocol.md `mesh.rekey.<n>`): a node that took a found tunnel's key as its overlay key
// after it enrolled tells the mesh, signed by its identity key, over the key it left, the key it took and the
// tunnel — so the mesh can check it came from the node it enrolled and compose from the tunnel.
//
// Told first, written second: `overlay take` publishes this and waits for the stream's acknowledgement
// before it saves the key, so a run again puts right whichever half did not happen. The same bytes sent
// twice are one message to the stream (Nats-Msg-Id is their digest).
//
// What the signature covers is a fixed text, not JSON, so the controller in another language need not
// reproduce one serialisation: the lines `mesh rekey v1`, node, left, taken, then the tunnel's interface,
// port, address, range, peers and mtu, each followed by "\n".
import { createHash, type KeyObject, sign, verify } from "node:crypto";
import { jetstream } from "@nats-io/jetstream";
import { headers } from "@nats-io/transport-node";
import * as z from "zod";
import { SERVER_ACK_TIMEOUT_MS } from "../defaults.ts";
import {
  ed25519PublicFromB64,
  type Membership,
  Name,
  nodeInboxPrefix,
  rekeySubject,
  Tunnel,
} from "../vocabulary/index.ts";
import { dial, membershipAuth } from "./dial.ts";
import { isNoResponders, isPermissionViolation, isTimeout, messageOf } from "./failures.ts";

const B64Key = z.string().regex(/^[A-Za-z0-9+/]{43}=$/, "must be standard base64 of 32 raw bytes");

export const Rekey = z.strictObject({
  v: z.literal(1),
  node: Name,
  /** The overlay public key the node enrolled with (or last told), now given up. */
  left: B64Key,
  /** The overlay public key taken from the tunnel: the one the tunnel's peers already know. */
  taken: B64Key,
  tunnel: Tunnel,
  sig: z.string().regex(/^[A-Za-z0-9+/]{86}==$/, "must be standard base64 of a 64-byte signature"),
});
export type Rekey = z.infer<typeof Rekey>;
export type RekeyBody = Omit<Rekey, "sig">;

/** The bytes the identity key signs. */
export function rekeySigned(r: RekeyBody): Buffer {
  const t = r.tunnel;
  const lines = [
    "mesh rekey v1",
    r.node,
    r.left,
    r.taken,
    t.interface,
    t.port,
    t.address,
    t.range,
    t.peers,
    t.mtu,
  ];
  return Buffer.from(lines.map((l) => `${l}\n`).join(""), "utf8");
}

export function signRekey(body: RekeyBody, identity: KeyObject): Rekey {
  const { v, node, left, taken, tunnel } = body;
  return { v, node, left, taken, tunnel, sig: sign(null, rekeySigned(body), identity).toString("base64") };
}

/** The mesh's side, and the tests': the message is well formed and signed by the identity key given. */
export function verifyRekey(
  value: unknown,
  identityB64: string,
): { ok: true; rekey: Rekey } | { ok: false; reason: string } {
  const parsed = Rekey.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, reason: `not a rekey: ${issue?.path.join(".") || "message"} ${issue?.message}` };
  }
  const key = ed25519PublicFromB64(identityB64);
  if (!key.ok) return { ok: false, reason: `the identity key ${key.reason}` };
  const { sig, ...body } = parsed.data;
  if (!verify(null, rekeySigned(body), key.key, Buffer.from(sig, "base64")))
    return { ok: false, reason: "the signature does not verify against the node's identity key" };
  return { ok: true, rekey: parsed.data };
}

export type Told = { ok: true; seq: number; duplicate: boolean } | { ok: false; reason: string };

/** Publish the rekey on `mesh.rekey.<n>` through JetStream as the node's own user; settled when the stream has it. */
export async function tellRekey(
  membership: Membership,
  rekey: Rekey,
  opts: { dialTimeoutMs?: number; ackTimeoutMs?: number; identity?: KeyObject } = {},
): Promise<Told> {
  const auth = membershipAuth(membership, opts.identity);
  if ("refused" in auth) return { ok: false, reason: `the mesh was not told: ${auth.refused}` };
  const dialled = await dial({
    servers: membership.servers,
    fingerprint: membership.fingerprint,
    auth,
    inboxPrefix: nodeInboxPrefix(rekey.node),
    name: membership.user,
    timeoutMs: opts.dialTimeoutMs,
  });
  if (!dialled.ok) return { ok: false, reason: `the mesh was not told: ${dialled.reason}` };
  const subject = rekeySubject(rekey.node);
  const data = Buffer.from(JSON.stringify(rekey), "utf8");
  const h = headers();
  h.set("Nats-Msg-Id", createHash("sha256").update(data).digest("hex"));
  try {
    // checkAPI off: $JS.API.INFO is not in the node's permissions
    const js = jetstream(dialled.nc, { checkAPI: false } as Parameters<typeof jetstream>[1]);
    const ack = await js.publish(subject, data, {
      headers: h,
      timeout: opts.ackTimeoutMs ?? SERVER_ACK_TIMEOUT_MS,
    });
    return { ok: true, seq: ack.seq, duplicate: ack.duplicate };
  } catch (e) {
    if (isNoResponders(e))
      return {
        ok: false,
        reason: `no stream on this bus keeps ${subject}: the mesh's REKEY stream is missing`,
      };
    if (isPermissionViolation(e))
      return { ok: false, reason: `the server refused the rekey: ${messageOf(e)}` };
    if (isTimeout(e)) return { ok: false, reason: "the server did not acknowledge the rekey in time" };
    return { ok: false, reason: `the rekey was not acknowledged: ${messageOf(e)}` };
  } finally {
    await dialled.nc.close().catch(() => undefined);
  }
}
