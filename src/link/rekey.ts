// The rekey (overlay.md, protocol.md `mesh.rekey.<n>`): a node that took a found tunnel's key as its overlay key
// after it enrolled tells the mesh, over the key it left, the key it took and the tunnel — a signed node message
// (`{v:2, body, sig}`, src/vocabulary/signed.ts) like its reports, so the mesh can check it came from the node it
// enrolled and compose from the tunnel.
//
// Told first, written second: `overlay take` publishes this and waits for the stream's acknowledgement
// before it saves the key, so a run again puts right whichever half did not happen. The same bytes sent
// twice are one message to the stream (Nats-Msg-Id is their digest; Ed25519 signs a body the same way twice).
import { createHash, type KeyObject } from "node:crypto";
import { jetstream } from "@nats-io/jetstream";
import { headers } from "@nats-io/transport-node";
import { SERVER_ACK_TIMEOUT_MS } from "../defaults.ts";
import {
  type Membership,
  nodeInboxPrefix,
  type RekeyBody,
  rekeySubject,
  type SignedMessage,
  signMessage,
  verifyNodeMessage,
} from "../vocabulary/index.ts";
import { dial, membershipAuth } from "./dial.ts";
import { isNoResponders, isPermissionViolation, isTimeout, messageOf } from "./failures.ts";

/** A rekey as the node keeps it: what it says, and the signed message that says it (sent again as it stands). */
export interface Rekey {
  body: RekeyBody;
  signed: SignedMessage;
}

export function signRekey(body: RekeyBody, identity: KeyObject): Rekey {
  const { v, node, left, taken, tunnel } = body;
  const fields: RekeyBody = { v, node, left, taken, tunnel };
  return { body: fields, signed: signMessage(fields, identity) };
}

/** The mesh's side, and the tests': the bytes on `mesh.rekey.<node>` are a rekey signed by the identity key given. */
export function verifyRekey(
  bytes: Uint8Array,
  node: string,
  identityB64: string,
): { ok: true; rekey: RekeyBody } | { ok: false; reason: string } {
  const verified = verifyNodeMessage(bytes, "rekey", node, identityB64);
  return verified.ok ? { ok: true, rekey: verified.value } : verified;
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
    inboxPrefix: nodeInboxPrefix(rekey.body.node),
    name: membership.user,
    timeoutMs: opts.dialTimeoutMs,
  });
  if (!dialled.ok) return { ok: false, reason: `the mesh was not told: ${dialled.reason}` };
  const subject = rekeySubject(rekey.body.node);
  const data = Buffer.from(JSON.stringify(rekey.signed), "utf8");
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
