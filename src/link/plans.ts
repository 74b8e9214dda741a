// The mesh's plan requests on `mesh.plan.<n>` (core, never a stream): each answered on its own reply address,
// which the node's user may publish to once (`allow_responses`). An answer that cannot be made is no answer:
// the mesh says the node did not answer.
import type { KeyObject } from "node:crypto";
import type { NatsConnection } from "@nats-io/transport-node";
import { type PlanAnswer, planSubject, signMessage } from "../vocabulary/index.ts";

export type { PlanAnswer };

/** Each answer signed by the node's identity key, as its reports are: the mesh believes it only so. */
export function answerPlans(
  nc: NatsConnection,
  node: string,
  identity: KeyObject,
  answer: (request: Uint8Array) => Promise<PlanAnswer>,
): void {
  nc.subscribe(planSubject(node), {
    callback: (err, m) => {
      if (err || !m.reply) return;
      void answer(m.data)
        .then((a) => m.respond(JSON.stringify(signMessage(a, identity))))
        .catch(() => undefined);
    },
  });
}
