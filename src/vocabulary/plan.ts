// A plan request and its answer (protocol.md "Plans"): the mesh asks a node what a declaration would do there;
// the node decides as its apply would and changes nothing. Signed by the mesh key like a declaration, but so
// that it can never be taken for one: the signature covers PLAN_CONTEXT and the body (a declaration's covers
// the body alone), the message names its body `plan` (a declaration's is `body`), and the body is no
// declaration's shape (the declaration sits inside it). It carries no serial: a plan neither raises nor spends
// the node's order, and a replayed one can only make the node read its machine again.

import type { KeyObject } from "node:crypto";
import { sign, verify } from "node:crypto";
import * as z from "zod";
import { MAX_BODY_BYTES, MAX_ENVELOPE_BYTES } from "../defaults.ts";
import {
  ALL_TYPES,
  type Declaration,
  digestOf,
  parseDeclarationBody,
  type TypeSupport,
} from "./declaration.ts";
import { ed25519PublicFromB64 } from "./envelope.ts";
import { parseJsonBytes } from "./json.ts";
import { type Refusal, refusalsFromIssues } from "./refusal.ts";
import { NodeName } from "./resources.ts";
import { Did } from "./wire.ts";

/** What the mesh key signs besides the body: a plan signature verifies as no declaration's, nor the reverse. */
export const PLAN_CONTEXT = "mesh-host plan v1\n";

export const planSubject = (node: string): string => `mesh.plan.${node}`;

const B64Key = z.lazy(() =>
  z.string().regex(/^[A-Za-z0-9+/]{43}=$/, "must be standard base64 of 32 raw bytes"),
);

export const PlanMessage = z.lazy(() =>
  z.strictObject({
    v: z.literal(1),
    plan: z.string(),
    sig: z.string().regex(/^[A-Za-z0-9+/]{86}==$/, "must be standard base64 of a 64-byte signature"),
  }),
);

export type PlanMessage = z.infer<typeof PlanMessage>;

/** The signed body: for whom (name and identity key), when, whether diffs are wanted, and the declaration. */
export const PlanBody = z.lazy(() =>
  z.strictObject({
    node: NodeName,
    to: B64Key,
    issued_at: z.iso.datetime(),
    diff: z.boolean(),
    declaration: z.record(z.string(), z.unknown()),
  }),
);

export type PlanBody = z.infer<typeof PlanBody>;

export const PlanLineWire = z.lazy(() =>
  z.strictObject({
    id: z.string().max(256),
    type: z.string().max(64),
    did: Did,
    detail: z.string().max(4096),
    diff: z.array(z.string().max(4096)).max(4096).optional(),
  }),
);

export type PlanLineWire = z.infer<typeof PlanLineWire>;

/** The node's answer: what the apply would do (`planned`), or why it would refuse (`refused`). */
export const PlanAnswer = z.lazy(() =>
  z.strictObject({
    v: z.literal(1),
    node: NodeName,
    /** The SHA-256 of the request's body: which question this answers. */
    request: z.string().regex(/^[0-9a-f]{64}$/),
    outcome: z.enum(["planned", "refused"]),
    plan: z.array(PlanLineWire).max(100_000),
    refusals: z
      .array(
        z.strictObject({ id: z.string().max(256), field: z.string().max(256), reason: z.string().max(4096) }),
      )
      .max(1000),
    notes: z.array(z.string().max(4096)).max(16).optional(),
  }),
);

export type PlanAnswer = z.infer<typeof PlanAnswer>;

/** The mesh's side: the body signed with PLAN_CONTEXT before it. */
export function signPlan(body: PlanBody, meshPrivateKey: KeyObject): PlanMessage {
  const text = JSON.stringify(body);
  const sig = sign(null, Buffer.from(PLAN_CONTEXT + text, "utf8"), meshPrivateKey).toString("base64");
  return { v: 1, plan: text, sig };
}

export type VerifiedPlan =
  | { ok: true; declaration: Declaration; diff: boolean; request: string }
  | { ok: false; refusals: Refusal[]; request: string };

export interface PlanVerifyOptions {
  meshKey: string;
  node: string;
  /** This node's identity public key: a request addressed to another enrolment is refused. */
  identity: string | null;
  support?: TypeSupport;
}

/** A plan request checked as a declaration is (size, shape, signature, node, schema) and addressed to this key. */
export function verifyPlan(bytes: Uint8Array, opts: PlanVerifyOptions): VerifiedPlan {
  const json = parseJsonBytes(bytes, MAX_ENVELOPE_BYTES);
  const plan = json.ok ? (json.value as { plan?: unknown } | null)?.plan : undefined;
  // what the answer names: the body's digest when there is one, else the bytes'
  const request = digestOf(typeof plan === "string" ? plan : bytes);
  const no = (field: string, reason: string): VerifiedPlan => ({
    ok: false,
    refusals: [{ id: "plan", field, reason }],
    request,
  });
  if (!json.ok) return no("", `the message ${json.reason}`);
  const message = PlanMessage.safeParse(json.value);
  if (!message.success)
    return { ok: false, refusals: refusalsFromIssues("plan", message.error.issues), request };
  const text = message.data.plan;
  if (Buffer.byteLength(text, "utf8") > MAX_BODY_BYTES)
    return no("plan", "is larger than a declaration may be");
  if (Buffer.from(text, "utf8").toString("utf8") !== text) return no("plan", "is not well-formed Unicode");
  const key = ed25519PublicFromB64(opts.meshKey);
  if (!key.ok) return no("mesh_key", `the membership's mesh key ${key.reason}`);
  if (!signed(text, message.data.sig, key.key))
    return no("sig", "signature does not verify against the mesh key");
  const body = PlanBody.safeParse(JSON.parse(text));
  if (!body.success) return { ok: false, refusals: refusalsFromIssues("plan", body.error.issues), request };
  if (body.data.node !== opts.node)
    return no("node", `is for node ${body.data.node}, not this node ${opts.node}`);
  if (opts.identity !== null && body.data.to !== opts.identity)
    return no("to", "is addressed to another identity key than this node's (an earlier enrolment)");
  const declaration = parseDeclarationBody(JSON.stringify(body.data.declaration), opts.support ?? ALL_TYPES);
  if (!declaration.ok) return { ...declaration, request };
  if (declaration.value.node !== opts.node)
    return no("node", `the declaration is for node ${declaration.value.node}, not ${opts.node}`);
  return { ok: true, declaration: declaration.value, diff: body.data.diff, request };
}

function signed(text: string, sigB64: string, key: KeyObject): boolean {
  try {
    return verify(null, Buffer.from(PLAN_CONTEXT + text, "utf8"), key, Buffer.from(sigB64, "base64"));
  } catch {
    return false;
  }
}
