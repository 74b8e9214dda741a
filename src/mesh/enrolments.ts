// An enrolment question admitted or refused, exactly once across every controller: the question reaches one of
// them (the ENROL stream's one durable consumer, shared), and the code is spent by compare-and-set on its
// record, so two questions raced with one code (on one controller or two) get one answer and one refusal.
// A question delivered again after a controller died mid-answer carries the same identity key: it is answered
// again only when it carries the very keys that spent the code (the answer is sealed to that sealing key: useless
// to anyone who copied the public keys, and the record is unchanged).
import { KV_CAS_TRIES } from "../defaults.ts";
import type { EnrolQuestion } from "../vocabulary/index.ts";
import { Conflict } from "./kv.ts";
import { shardOf } from "./shards.ts";
import { type CodeRecord, changeNode, type State } from "./state.ts";

const sameKeys = (a: EnrolQuestion["keys"], b: EnrolQuestion["keys"]) =>
  a.identity === b.identity && a.sealing === b.sealing && a.overlay === b.overlay;

/** Why the code cannot be spent by this question, or null when it can (or this question already spent it). */
export function codeRefusal(code: CodeRecord | null, q: EnrolQuestion, now = Date.now()): string | null {
  if (!code)
    return `node ${q.node} has no enrolment code (enrolled already, or removed): \`mesh node reissue\` makes one (\`mesh node add\` once removed)`;
  if (code.spent) return sameKeys(code.spent.keys, q.keys) ? null : `node ${q.node}'s code has been used`;
  if (Date.parse(code.expires_at) <= now) return `node ${q.node}'s code expired at ${code.expires_at}`;
  return null;
}

/** Spend the node's code for this question; the refusal, or the code this question holds now. */
export async function spendCode(state: State, q: EnrolQuestion): Promise<string | CodeRecord> {
  for (let i = 1; ; i++) {
    const entry = await state.codes.get(q.node);
    const refusal = codeRefusal(entry?.value ?? null, q);
    if (refusal) return refusal;
    if (!entry) return `node ${q.node} has no enrolment code`;
    if (entry.value.spent) return entry.value;
    const spent = { at: new Date().toISOString(), keys: q.keys };
    try {
      await state.codes.update(q.node, { ...entry.value, spent }, entry.revision);
      return { ...entry.value, spent };
    } catch (e) {
      if (!(e instanceof Conflict) || i >= KV_CAS_TRIES) throw e;
    }
  }
}

/**
 * Admit the question: its code spent, then its keys and facts in the node's record (its pending enrolling user
 * gone from it). The refusal otherwise; the code spent, whose enrolling user the caller revokes.
 */
/** An enrolment admitted: the code it spent, and whether the node may still hold a consumer from before. */
export interface Admitted {
  spent: CodeRecord;
  /**
   * Enrolled before the shards (its record names no account): it may have read from a consumer of its own, which
   * its new user, its shard's, has no grant on. Dropped once the answer is out.
   */
  consumerLeft: boolean;
}

export async function admit(state: State, q: EnrolQuestion, subject: string): Promise<string | Admitted> {
  if (subject !== `mesh.enrol.${q.node}`) return `asked on ${subject} for node ${q.node}`;
  if (!(await state.nodes.get(q.node))) return `node ${q.node} is not in this mesh`;
  const spent = await spendCode(state, q);
  if (typeof spent === "string") return spent;
  const consumerLeft = await changeNode(state, q.node, (r) => ({
    value: {
      ...r,
      enrol: r.enrol?.user === spent.user ? null : r.enrol,
      keys: q.keys,
      facts: q.facts,
      enrolled_at: r.enrolled_at ?? new Date().toISOString(),
      // its user is issued in its shard (up.ts), a node enrolled before the shards included
      account: shardOf(q.node),
    },
    result: r.enrolled_at !== null && r.enrolled_at !== undefined && r.account === undefined,
  }));
  return { spent, consumerLeft };
}
