// `mesh plan`: what a declaration would do on each target, asked of the node itself. The body is composed and
// checked exactly as a push composes it (secrets sealed to the node, the host's own vocabulary), then signed as a
// plan request (vocabulary/plan.ts: it can never verify as a declaration) and sent as a core request on
// `mesh.plan.<n>`, never through DECLARE: nothing pending for the node is displaced, no serial is taken or kept,
// and nothing here or on the node changes. MESH reaches a node of a shard on `mesh.plan.<shard>.<n>` (accounts.ts
// planSubjectIn). A node not on the bus is said at once (no plan subscription of its own in its account, asked over
// SYS); one on it has the deadline to answer.

import { printable } from "../printable.ts";
import { digestOf, type PlanAnswer, type PlanBody, signPlan } from "../vocabulary/index.ts";
import { firstLine } from "./bus.ts";
import { listeningNodes } from "./claims.ts";
import { heardFrom } from "./heard.ts";
import type { MeshDir } from "./layout.ts";
import { compose, type PushInput } from "./push.ts";
import { type NodesAccount, planSubjectIn } from "./shards.ts";
import { knownNode, nodesAccountOf, type State } from "./state.ts";

export interface PlanAsked {
  node: string;
  /** The account its user is in: where it listens for the request. */
  account: NodesAccount;
  body: PlanBody;
}

/** One node's word: its plan (or its refusal), or why there is none. */
export type PlanHeard =
  | { node: string; answer: PlanAnswer }
  | { node: string; answer: null; silent: "offline" | "no answer" | "malformed"; why: string };

/** Every target's request, composed and checked as its push would be; a refusal names the node and the field. */
export async function composePlans(
  state: State,
  targets: string[],
  input: PushInput,
  diff: boolean,
  now = new Date(),
): Promise<PlanAsked[]> {
  const records = await Promise.all(targets.map(async (n) => (await knownNode(state, n)).value));
  return records.map((record) => {
    const n = record.node;
    const { kept } = compose(record, input, {}, now);
    const body: PlanBody = {
      node: n,
      to: record.keys!.identity,
      issued_at: now.toISOString(),
      diff,
      declaration: kept,
    };
    return { node: n, account: nodesAccountOf(record), body };
  });
}

/** Ask every node at once; each answer checked (its node, the request it answers) and its words made printable. */
export async function askPlans(
  mesh: MeshDir,
  state: State,
  asked: PlanAsked[],
  waitMs: number,
): Promise<PlanHeard[]> {
  const bus = state.bus;
  // a request across accounts to a node not on the bus is never "no responders": asked first who listens
  const listening = await listeningNodes(mesh, asked);
  {
    const key = mesh.signingKey();
    return await Promise.all(
      asked.map(async (a): Promise<PlanHeard> => {
        if (listening && !listening.has(a.node))
          return { node: a.node, answer: null, silent: "offline", why: "not connected to the bus" };
        const message = signPlan(a.body, key);
        try {
          const reply = await bus.nc.request(planSubjectIn(a.account, a.node), JSON.stringify(message), {
            timeout: waitMs,
          });
          return heard(a.node, a.body.to, message.plan, reply.data);
        } catch (e) {
          return unanswered(a.node, e, waitMs);
        }
      }),
    );
  }
}

function unanswered(node: string, e: unknown, waitMs: number): PlanHeard {
  const why = firstLine(e);
  if (/no responders|503/i.test(why))
    return { node, answer: null, silent: "offline", why: "not connected to the bus" };
  if (/timeout/i.test(why))
    return { node, answer: null, silent: "no answer", why: `no answer within ${waitMs / 1000} s` };
  return { node, answer: null, silent: "no answer", why: `the request failed: ${why}` };
}

function heard(node: string, identity: string | null, body: string, data: Uint8Array): PlanHeard {
  const malformed = (why: string): PlanHeard => ({ node, answer: null, silent: "malformed", why });
  // believed only when signed by the node's enrolled identity key, as its reports are (heard.ts)
  const said = heardFrom(node, identity, data, "plan");
  if (!said.ok) return malformed(`its answer is not the node's: ${said.reason}`);
  if (said.value.request !== digestOf(body)) return malformed("its answer is to another request");
  return { node, answer: cleaned(said.value) };
}

/** What a node says is the least trusted text there is: no control character of it reaches a terminal. */
function cleaned(a: PlanAnswer): PlanAnswer {
  const p = (s: string) => printable(s, 4096);
  return {
    ...a,
    plan: a.plan.map((l) => ({
      ...l,
      id: p(l.id),
      type: p(l.type),
      detail: p(l.detail),
      ...(l.diff ? { diff: l.diff.map(p) } : {}),
    })),
    refusals: a.refusals.map((r) => ({ id: p(r.id), field: p(r.field), reason: p(r.reason) })),
    ...(a.notes ? { notes: a.notes.map(p) } : {}),
  };
}
