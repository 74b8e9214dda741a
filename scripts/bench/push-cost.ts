// `npm run bench:fleet -- --push-cost N`: what a push's own bookkeeping costs a node, against the bus's own price
// of one replicated write, measured in the same run on a three-server cluster. Before its publishes a push raises
// every target's serial in the mesh-nodes bucket (compare-and-set, one write at a time: kv.ts `serialised`); after
// them it records each declaration's stream sequence there. The floor is one replicated put after another to a
// bucket of the same shape: a push near two of them a node (and its publish) is at the bus's price, not its own.
// The N records are written here as enrolled nodes' (one set of real public keys shared; no node dials): a push
// with `--wait-s 0` reads only records, so it cannot tell, and enrolling N takes an hour at 10,000.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as z from "zod";
import { Bucket, MeshDir, type NodeRecord, openState } from "../../src/mesh/index.ts";
import { newRecord } from "../../src/mesh/nodes.ts";
import { makeKeyPair, makeOverlayKey, publicKeys } from "../../src/store/index.ts";
import { freePortPairs, mesh } from "../../test/mesh/operator.ts";
import { ensureSea } from "../../test/support/sea.ts";
import { raise, say, tenFiles } from "./fleet-mesh.ts";
import { formatMs, formatRatio, percentile } from "./stats.ts";

const SERVERS = 3;
const ROUNDS = 3;
const WRITE_AT_ONCE = 200;
const Floor = z.object({ n: z.number() });

function enrolledRecord(node: string, keys: NodeRecord["keys"], at: Date): NodeRecord {
  return { ...newRecord(node, at), enrolled_at: at.toISOString(), keys };
}

export async function pushCostBench(n: number): Promise<void> {
  process.env.MESH_HOST_BIN ??= ensureSea();
  const base = mkdtempSync(join(tmpdir(), "bench-push-cost-"));
  const dir = join(base, "mesh");
  mkdirSync(base, { recursive: true });
  const ports = await freePortPairs(SERVERS);
  const init = await mesh(dir, ["init", ...ports.flatMap((p) => ["--server", `127.0.0.1:${p}`])]);
  if (init.code !== 0) throw new Error(`mesh init: ${init.stderr}`);
  const ups = await raise(dir, SERVERS);
  try {
    say(
      `# bench:fleet --push-cost — ${new Date().toISOString().slice(0, 10)}, ${n} nodes, ${SERVERS} servers`,
    );
    const state = await openState(new MeshDir(dir));
    const floorMs: number[] = [];
    try {
      const keys = publicKeys({
        identity: makeKeyPair("ed25519"),
        sealing: makeKeyPair("x25519"),
        overlay: makeOverlayKey(),
      });
      const at = new Date();
      const names = Array.from({ length: n }, (_, i) => `n${String(i + 1).padStart(5, "0")}`);
      for (let i = 0; i < n; i += WRITE_AT_ONCE)
        await Promise.all(
          names
            .slice(i, i + WRITE_AT_ONCE)
            .map((name) => state.nodes.put(name, enrolledRecord(name, keys, at))),
        );
      const floor = new Bucket(state.bus, "bench-floor", Floor);
      await floor.ensure(SERVERS);
      for (let round = 0; round < ROUNDS; round++) {
        const start = performance.now();
        for (const name of names) await floor.put(name, { n: round });
        floorMs.push((performance.now() - start) / n);
      }
    } finally {
      await state.bus.close();
    }
    const pushMs: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const file = tenFiles(base, `round-${round}`);
      const start = performance.now();
      const r = await mesh(dir, ["push", "--all", file, "--wait-s", "0"], { timeoutMs: 60 * 60_000 });
      if (r.code !== 0) throw new Error(`mesh push --all: ${r.stderr}`);
      pushMs.push((performance.now() - start) / n);
    }
    const push = percentile(pushMs, 50);
    const floor = percentile(floorMs, 50);
    say(
      `push --all --wait-s 0 to ${n} (the executable, median of ${ROUNDS}): ${formatMs(push * n)} in all, ${formatMs(push)} a node; one replicated put after another: ${formatMs(floor)} a write; a push costs a node ${formatRatio(push, floor)} the bus's price of one write`,
    );
  } finally {
    await Promise.all([...ups.values()].map((u) => u.stop()));
    rmSync(base, { recursive: true, force: true });
  }
}
