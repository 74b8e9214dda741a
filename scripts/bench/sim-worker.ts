// One thread of the simulated fleet (sim-threads.ts starts them): its share of the nodes, each enrolled, linked
// and held here, so that their verifying, signing and TLS fill this thread's event loop and not the bench's own
// (its listener, its dials, the functions it times). Asked by the bench's thread, answering each question by id,
// and telling it each link's coming up and each enrolment's phase as they happen.
import { parentPort, workerData } from "node:worker_threads";
import { MeshDir, reissueNode } from "../../src/mesh/index.ts";
import { EnrolFailed, SimNode } from "./sim-node.ts";
import type { Asked, NodeState, Told } from "./sim-threads.ts";

/** A cut enrolment (enrolOne) is likelier the longer an answer takes: a cluster's answers are slower. */
const REISSUE_TRIES = 10;
/** How a failed enrolment is asked again as an operator would run `enrol` again: the bus not reached in time. */
const ASK_AGAIN_KINDS = new Set(["unreachable", "timeout", "tls"]);

const { dir, heartbeatS } = workerData as { dir: string; heartbeatS: number };
const port = parentPort!;
const nodes: SimNode[] = [];
const tell = (told: Told) => port.postMessage(told);

/**
 * A node's enrolment; when the bus cut its enrolling user before the answer came (`mesh up` revokes each batch of
 * spent codes ENROL_REVOKE_DELAY_MS after the batch's first, so a code spent late in a batch can be revoked before
 * its own answer is out), a new code from `node reissue`'s function and a new question, as an operator would;
 * when the bus was not reached or did not answer in time, the same code again, as an operator runs `enrol` again
 * (and a new code when that one is then refused as spent: its first answer was given and lost).
 * Both told, so the figures say how often.
 */
async function enrolOne(name: string, code: string): Promise<SimNode> {
  const keys = SimNode.keys();
  try {
    for (let i = 1; ; i++) {
      try {
        tell({ event: "phase", name, phase: "asking" });
        return await SimNode.enrol(code, keys);
      } catch (e) {
        if (i >= REISSUE_TRIES) throw e;
        if (e instanceof EnrolFailed && ASK_AGAIN_KINDS.has(e.kind)) {
          tell({ event: "askedAgain" });
          continue;
        }
        // a code asked with again after its answer was lost is spent: refused at the dial, as it says
        const spent = e instanceof EnrolFailed && e.kind === "auth" && i > 1;
        if (!spent && !(e as Error).message.includes("withdrew")) throw e;
        tell({ event: "reissued" });
        tell({ event: "phase", name, phase: "reissuing" });
        code = (await reissueNode(new MeshDir(dir), name)).code;
      }
    }
  } finally {
    tell({ event: "phase", name, phase: null });
  }
}

function states(): NodeState[] {
  return nodes.map((x) => ({
    name: x.name,
    failure: x.failure,
    took: x.took,
    acked: x.acked,
    server: x.server,
    waiting: x.waiting,
    serial: x.serial,
  }));
}

async function answer(asked: Asked): Promise<unknown> {
  switch (asked.op) {
    case "enrol": {
      const node = await enrolOne(asked.name, asked.code);
      // kept as soon as it runs, so a failure later still stops it
      nodes.push(node);
      node.start({ heartbeatS, onUp: (name, at) => tell({ event: "up", name, at }) });
      return null;
    }
    case "state":
      return states();
    case "stop":
      await Promise.all(nodes.map((x) => x.stop()));
      return null;
  }
}

port.on("message", (asked: Asked) => {
  answer(asked).then(
    (value) => tell({ event: "answer", id: asked.id, ok: true, value }),
    (e: Error) => tell({ event: "answer", id: asked.id, ok: false, message: e.message }),
  );
});
