// Issue 9, the scenarios that need `mesh-host run` and the mesh double, in their short form: bus faults (the
// three-node cluster runs in the long form only), surface, secrets over the bus, least privilege, and a hostile
// node beside healthy ones on a real mesh.
import { describe, expect, it } from "vitest";
import { busFaults } from "./bus-faults.ts";
import { hostileNode } from "./hostile-node.ts";
import { leastPrivilege } from "./privilege.ts";
import { replayed } from "./replay.ts";
import { secretsFullFlow } from "./secrets-flow.ts";
import { type Scenario, seedFrom } from "./support.ts";
import { surface } from "./surface.ts";

const seed = seedFrom(process.env.CHAOS_SEED);

describe("chaos: the node on a bus", () => {
  const cases: [string, Scenario][] = [
    ["bus faults: server down, killed, restarted; node killed; every report arrives", busFaults],
    ["surface: no listening socket, exactly one connection to the server", surface],
    ["secrets: no token, password or secret anywhere but the declared file", secretsFullFlow],
    ["least privilege: exactly protocol.md's permissions; every wider act refused", leastPrivilege],
    ["replayed and reordered envelopes: the node only moves forward", replayed],
    ["a hostile node beside healthy ones: reply tricks, floods and forged reports, all held", hostileNode],
  ];
  it.each(cases)(
    "%s",
    async (_name, scenario) => {
      const outcome = await scenario.run({ long: false, seed });
      expect(outcome.failures).toEqual([]);
      expect(outcome.held).toBe(outcome.tried);
    },
    600_000,
  );
});
