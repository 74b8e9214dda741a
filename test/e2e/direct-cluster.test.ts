// A node reading its declarations directly, linked to a three-server JetStream cluster (DECLARE with three replicas,
// allow_direct: any replica answers its direct get): it takes a push, takes the next with the stream's leader killed,
// and the next again with its own server killed, once it has dialled another (test/chaos/cluster.ts).
import { describe, expect, it } from "vitest";
import { clusterLeaderKilled } from "../chaos/cluster.ts";
import { useBuiltExecutable } from "../support/sea.ts";

describe("a node reading directly from a cluster", () => {
  useBuiltExecutable();

  it("takes a push, then the next with the stream leader killed, then the next with its own server killed", async () => {
    const notes: string[] = [];
    expect(await clusterLeaderKilled(notes)).toEqual([]);
  }, 900_000);
});
