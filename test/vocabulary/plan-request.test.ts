// A plan request can never be taken for a declaration, nor a declaration for a plan request: the two are signed
// over different bytes (PLAN_CONTEXT), named differently (`plan` and `body`) and shaped differently. A plan for
// another node, or addressed to another enrolment's key, is refused as a declaration would be.
import { generateKeyPairSync } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  makeMeshKey,
  type PlanBody,
  signEnvelope,
  signMessage,
  signPlan,
  verifyEnvelope,
  verifyNodeMessage,
  verifyPlan,
} from "../../src/vocabulary/index.ts";

const mesh = makeMeshKey();
const NODE = "web-1";
const IDENTITY = Buffer.alloc(32, 7).toString("base64");
const declaration = {
  v: 1,
  node: NODE,
  mode: "converged",
  resources: [{ id: "motd", type: "file", path: "/etc/motd", content: "hello\n" }],
};
const body = (extra: Partial<PlanBody> = {}): PlanBody => ({
  node: NODE,
  to: IDENTITY,
  issued_at: "2026-12-04T12:00:00.000Z",
  diff: true,
  declaration,
  ...extra,
});
const bytes = (v: unknown) => Buffer.from(JSON.stringify(v));
const opts = { meshKey: mesh.publicB64, node: NODE, identity: IDENTITY };

function refusedField(result: ReturnType<typeof verifyPlan> | ReturnType<typeof verifyEnvelope>): string {
  if (result.ok) throw new Error("expected a refusal");
  return result.refusals[0]!.field;
}

describe("a plan request", () => {
  it("verifies as a plan with its declaration and whether diffs are wanted", () => {
    const verified = verifyPlan(bytes(signPlan(body(), mesh.privateKey)), opts);
    expect(verified).toMatchObject({ ok: true, diff: true, declaration: { node: NODE } });
  });

  it("never verifies as a declaration: renamed to `body`, its signature does not hold", () => {
    const plan = signPlan(body(), mesh.privateKey);
    expect(refusedField(verifyEnvelope(bytes({ v: 1, body: plan.plan, sig: plan.sig }), opts))).toBe("sig");
    // nor does a body shaped as a declaration, signed as a plan
    const text = JSON.stringify({ ...declaration, serial: 99, issued_at: "2026-12-04T12:00:00Z" });
    const asPlan = signPlan(JSON.parse(text), mesh.privateKey);
    expect(refusedField(verifyEnvelope(bytes({ v: 1, body: asPlan.plan, sig: asPlan.sig }), opts))).toBe(
      "sig",
    );
  });

  it("a signed declaration is no plan request, under either name", () => {
    const envelope = signEnvelope(JSON.stringify({ ...declaration, serial: 3 }), mesh.privateKey);
    // refused by its shape: `body` is no field of a plan request, and `plan` is missing
    expect(["body", "plan"]).toContain(refusedField(verifyPlan(bytes(envelope), opts)));
    expect(refusedField(verifyPlan(bytes({ v: 1, plan: envelope.body, sig: envelope.sig }), opts))).toBe(
      "sig",
    );
  });

  it("is refused for another node, another enrolment's key, or another mesh's signature", () => {
    const other = makeMeshKey();
    expect(refusedField(verifyPlan(bytes(signPlan(body({ node: "web-2" }), mesh.privateKey)), opts))).toBe(
      "node",
    );
    const elsewhere = Buffer.alloc(32, 9).toString("base64");
    expect(refusedField(verifyPlan(bytes(signPlan(body({ to: elsewhere }), mesh.privateKey)), opts))).toBe(
      "to",
    );
    expect(refusedField(verifyPlan(bytes(signPlan(body(), other.privateKey)), opts))).toBe("sig");
    const forOther = body({ declaration: { ...declaration, node: "web-2" } });
    expect(refusedField(verifyPlan(bytes(signPlan(forOther, mesh.privateKey)), opts))).toBe("node");
  });
});

describe("a plan's answer", () => {
  const node = generateKeyPairSync("ed25519");
  const identity = node.publicKey.export({ format: "der", type: "spki" }).subarray(12).toString("base64");
  const answer = {
    v: 1 as const,
    node: NODE,
    request: "a".repeat(64),
    outcome: "planned" as const,
    plan: [{ id: "motd", type: "file", did: "updated" as const, detail: "/etc/motd rewritten" }],
    refusals: [],
  };

  it("is the node's only when signed by its identity key, and is never taken for a report", () => {
    const signed = bytes(signMessage(answer, node.privateKey));
    expect(verifyNodeMessage(signed, "plan", NODE, identity)).toMatchObject({ ok: true, value: answer });
    const other = generateKeyPairSync("ed25519");
    expect(
      verifyNodeMessage(bytes(signMessage(answer, other.privateKey)), "plan", NODE, identity),
    ).toMatchObject({
      ok: false,
    });
    expect(verifyNodeMessage(bytes(answer), "plan", NODE, identity)).toMatchObject({ ok: false });
    expect(verifyNodeMessage(signed, "report", NODE, identity)).toMatchObject({ ok: false });
  });
});
