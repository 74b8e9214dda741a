// The mesh's plan requests on `mesh.plan.<n>` (core, never a stream): each answered on its own reply address,
// which the node's user may publish to once (`allow_responses`). An answer that cannot be made is no answer:
// the mesh says the node did not answer.
import type { NatsConnection } from "@nats-io/transport-node";
import { type PlanAnswer, planSubject } from "../vocabulary/index.ts";

export type { PlanAnswer };

export function answerPlans(
  nc: NatsConnection,
  node: string,
  answer: (request: Uint8Array) => Promise<PlanAnswer>,
): void {
  nc.subscribe(planSubject(node), {
    callback: (err, m) => {
      if (err || !m.reply) return;
      void answer(m.data)
        .then((a) => m.respond(JSON.stringify(a)))
        .catch(() => undefined);
    },
  });
}
