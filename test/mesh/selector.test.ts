// `--where`: Kubernetes' label-selector grammar over a node's labels and facts, each requirement as Kubernetes
// reads it (`!=` and `notin` match a node without the key), and a selector that does not parse refused in one
// line naming what is wrong.
import { describe, expect, it } from "vitest";
import { MeshRefused } from "../../src/mesh/index.ts";
import { parseLabels } from "../../src/mesh/labels.ts";
import { parseSelector, selects } from "../../src/mesh/selector.ts";

const web = { role: "web", tier: "a", os: "linux", canary: "" };
const db = { role: "db", os: "android" };
const pick = (s: string) =>
  Object.entries({ web, db })
    .filter(([, f]) => selects(parseSelector(s), f))
    .map(([n]) => n);

describe("a selector", () => {
  it("reads each requirement as Kubernetes does", () => {
    expect(pick("role=web")).toEqual(["web"]);
    expect(pick("role==db")).toEqual(["db"]);
    expect(pick("os!=android")).toEqual(["web"]);
    expect(pick("tier!=a")).toEqual(["db"]);
    expect(pick("tier in (a,b)")).toEqual(["web"]);
    expect(pick("tier notin (a)")).toEqual(["db"]);
    expect(pick("canary")).toEqual(["web"]);
    expect(pick("!canary")).toEqual(["db"]);
    expect(pick("role in (web, db), !tier")).toEqual(["db"]);
    expect(pick(" role = web , os = linux ")).toEqual(["web"]);
    expect(pick("example.com/team=x")).toEqual([]);
  });

  it("refuses what does not parse, in one line naming it", () => {
    const cases: [string, RegExp][] = [
      ["", /--where needs a selector/],
      ["tier in (a", /a "\(" is never closed/],
      ["tier in a)", /a "\)" with no "\("/],
      ["role=web,,os=linux", /an empty requirement/],
      ["tier in ()", /the set needs values/],
      ["=web", /is not a label key/],
      ["role=we b", /is not a label value/],
      ["role web", /an operator is missing/],
      ["-role", /is not a label key/],
    ];
    for (const [s, says] of cases) {
      let thrown: unknown;
      try {
        parseSelector(s);
      } catch (e) {
        thrown = e;
      }
      expect(thrown, s).toBeInstanceOf(MeshRefused);
      expect((thrown as Error).message, s).toMatch(says);
      expect((thrown as Error).message).not.toContain("\n");
    }
  });
});

describe("labels", () => {
  it("sets KEY=VALUE and removes KEY-, never a fact's name, never twice", () => {
    expect(parseLabels(["role=web", "canary=", "old-"])).toEqual({
      set: { role: "web", canary: "" },
      remove: ["old"],
    });
    expect(() => parseLabels(["os=linux"])).toThrow(/is a fact the node reports/);
    expect(() => parseLabels(["role=a", "role=b"])).toThrow(/given twice/);
    expect(() => parseLabels(["role"])).toThrow(/neither KEY=VALUE nor KEY-/);
    expect(() => parseLabels(["role=a b"])).toThrow(/is not a label value/);
  });
});
