// A plan the mesh asked for (`mesh plan`): the request verified, then decided exactly as the apply would decide
// it (applyDeclaration with dryRun: the same decide functions `plan FILE` uses) against this machine and its
// records. Nothing is written: not the kept declaration, not the order's high-water mark, not a record, not the
// outbox. The answer is bounded: a plan whose diffs would not fit the bus's payload goes without them, and says so.
import { MAX_PLAN_ANSWER_BYTES } from "../defaults.ts";
import { loadKeys, publicKeys } from "../store/index.ts";
import { type PlanAnswer, verifyPlan } from "../vocabulary/index.ts";
import { applyDeclaration } from "./apply.ts";
import type { NodeParts } from "./sources.ts";

/** This node's identity public key, or null where its keys cannot be read (the request is then judged without). */
function identityOf(node: NodeParts): string | null {
  const keys = loadKeys(node.state.dir);
  return keys.ok ? publicKeys(keys.keys).identity : null;
}

/** The answer to a plan request's bytes: the plan, or why the apply would refuse it. */
export async function planAsked(node: NodeParts, data: Uint8Array): Promise<PlanAnswer> {
  const verified = verifyPlan(data, {
    meshKey: node.membership.mesh_key,
    node: node.node,
    identity: identityOf(node),
    support: node.host.support,
  });
  const answer = { v: 1 as const, node: node.node, request: verified.request };
  if (!verified.ok) return { ...answer, outcome: "refused", plan: [], refusals: verified.refusals };
  const result = await applyDeclaration({
    host: node.host,
    state: node.state,
    originals: node.originals,
    ports: node.ports,
    unseal: node.unseal,
    declaration: verified.declaration,
    seq: 0,
    digest: verified.request,
    source: "link",
    dryRun: true,
    diff: verified.diff,
  });
  const planned: PlanAnswer = {
    ...answer,
    outcome: result.exit === 2 ? "refused" : "planned",
    plan: result.plan,
    refusals: result.report.refusals,
  };
  return bounded(planned);
}

/** Within MAX_PLAN_ANSWER_BYTES: the diffs go first, then the unchanged lines, each dropping said in a note. */
function bounded(answer: PlanAnswer): PlanAnswer {
  const size = (a: PlanAnswer) => Buffer.byteLength(JSON.stringify(a));
  if (size(answer) <= MAX_PLAN_ANSWER_BYTES) return answer;
  const plain = answer.plan.map(({ diff: _d, ...line }) => line);
  const withoutDiffs = {
    ...answer,
    plan: plain,
    notes: ["the diffs were left out: too large for one answer"],
  };
  if (size(withoutDiffs) <= MAX_PLAN_ANSWER_BYTES) return withoutDiffs;
  const unchanged = plain.filter((l) => l.did === "unchanged").length;
  return {
    ...answer,
    plan: plain.filter((l) => l.did !== "unchanged"),
    notes: [`the diffs and ${unchanged} unchanged steps were left out: too large for one answer`],
  };
}
